package main

import (
	"testing"
	"time"
)

// The exit pods' termination message: adjtimex's sub-seconds are microseconds, or nanoseconds when the
// clock's status has STA_NANO.
func TestMessageTime(t *testing.T) {
	for _, tt := range []struct {
		msg  string
		want time.Time
		ok   bool
	}{
		{msg: "1764650000 123456 1", want: time.Unix(1764650000, 123456000), ok: true},
		{msg: "1764650000 123456789 8193", want: time.Unix(1764650000, 123456789), ok: true},
		{msg: "1764650000 5 8193", want: time.Unix(1764650000, 5), ok: true},
		{msg: "1764650000 1234567 1", ok: false}, // a microsecond count of a second or more
		{msg: "1764650000123456", ok: false},
		{msg: "", ok: false},
		{msg: "0 5 1", ok: false},
		{msg: "x 5 1", ok: false},
	} {
		got, ok := messageTime(tt.msg)
		if ok != tt.ok || (ok && !got.Equal(tt.want)) {
			t.Errorf("messageTime(%q) = %v, %v; want %v, %v", tt.msg, got, ok, tt.want, tt.ok)
		}
	}
}

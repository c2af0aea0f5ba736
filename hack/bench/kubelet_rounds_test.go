package main

import (
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []time.Duration
		want time.Duration
	}{
		{[]time.Duration{5}, 5},
		{[]time.Duration{300, 100, 200}, 200},
		{[]time.Duration{-50, 250, 100, 400}, 175},
		{[]time.Duration{7, 7, 1}, 7},
	}
	for _, tt := range tests {
		in := append([]time.Duration(nil), tt.in...)
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
		for i := range in {
			if in[i] != tt.in[i] {
				t.Errorf("median reordered its input: %v, was %v", tt.in, in)
				break
			}
		}
	}
}

func TestMedianRatios(t *testing.T) {
	if got := median([]float64{0.92, 0.71, 0.76}); got != 0.76 {
		t.Errorf("median of three ratios = %v, want 0.76", got)
	}
	if got := median([]float64{0.8, 0.7}); got != 0.75 {
		t.Errorf("median of two ratios = %v, want 0.75", got)
	}
}

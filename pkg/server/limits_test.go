package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestLongRunning(t *testing.T) {
	tests := []struct {
		url      string
		long     bool
		deadline time.Duration
	}{
		{"/exec/ns/pod/ctr?command=sh", true, 0},
		{"/attach/ns/pod/uid/ctr", true, 0},
		{"/portForward/ns/pod", true, 0},
		{"/containerLogs/ns/pod/ctr?follow=true", true, 0},
		{"/containerLogs/ns/pod/ctr?follow=false", false, 0},
		{"/containerLogs/ns/pod/ctr", false, 0},
		{"/debug/pprof/profile?seconds=5", true, 35 * time.Second},
		{"/debug/pprof/profile", true, 60 * time.Second},
		{"/debug/pprof/trace?seconds=99999999", true, time.Hour + 30*time.Second},
		{"/debug/pprof/heap", false, 0},
		{"/healthz", false, 0},
		{"/execfoo", false, 0},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, tt.url, nil)
		if long, d := longRunning(r); long != tt.long || d != tt.deadline {
			t.Errorf("%s: long %v deadline %v, want %v %v", tt.url, long, d, tt.long, tt.deadline)
		}
	}
}

// Callers beyond the in-flight bounds get 429 with Retry-After, requests and streams each within their own
// bound; a request that ends on its own is cut at the request timeout.
func TestLimiter(t *testing.T) {
	l := newLimiter(Limits{MaxRequestsInFlight: 1, MaxStreamsInFlight: 1, RequestTimeout: 50 * time.Millisecond})
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	var sawDeadline error
	h := l.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		if r.URL.Path == "/slow" {
			<-r.Context().Done()
			sawDeadline = r.Context().Err()
			return
		}
		<-release
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) (*http.Response, error) { return http.Get(srv.URL + path) }

	done := make(chan struct{}, 2)
	go func() { _, _ = get("/containerLogs/a/b/c"); done <- struct{}{} }()
	go func() { _, _ = get("/exec/a/b/c"); done <- struct{}{} }()
	<-entered
	<-entered
	for _, path := range []string{"/containerLogs/a/b/c", "/attach/a/b/c"} {
		resp, err := get(path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("%s beyond the bound: %d, Retry-After %q", path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	close(release)
	<-done
	<-done

	start := time.Now()
	if resp, err := get("/slow"); err == nil {
		resp.Body.Close()
	}
	if !errors.Is(sawDeadline, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("slow request ended with %v after %v", sawDeadline, time.Since(start))
	}
}

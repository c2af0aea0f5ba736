package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

// requestClass is how a request counts against the in-flight limits and
// which timeouts apply to it.
type requestClass int

const (
	readOnly    requestClass = iota // get, list, discovery: bounded, timed out
	mutating                        // create, update, patch, delete: bounded, timed out
	longRunning                     // watches and streams: their own bound, no timeouts
)

// classify returns a request's class, as kube-apiserver's long-running check
// and max-in-flight filter decide it: watches and the log, exec, attach,
// portforward and proxy subresources are long-running; then any write verb
// is mutating.
func classify(info *request.Info) requestClass {
	if info.Verb == "watch" || (!info.IsResource && info.Path == SnapshotPath) {
		return longRunning
	}
	if info.IsResource {
		switch info.Subresource {
		case "log", "exec", "attach", "portforward", "proxy":
			return longRunning
		}
	}
	switch info.Verb {
	case "create", "update", "patch", "delete", "deletecollection", "post", "put":
		return mutating
	}
	return readOnly
}

// inFlight bounds the requests served at once, per class. It is safe for
// concurrent use.
type inFlight struct {
	slots [3]chan struct{}
}

func newInFlight(readOnlyMax, mutatingMax, longRunningMax int) *inFlight {
	return &inFlight{slots: [3]chan struct{}{
		make(chan struct{}, readOnlyMax), make(chan struct{}, mutatingMax), make(chan struct{}, longRunningMax)}}
}

// acquire takes a slot of class c without waiting, and returns the function
// that gives it back; false when every slot is taken.
func (l *inFlight) acquire(c requestClass) (func(), bool) {
	select {
	case l.slots[c] <- struct{}{}:
		return func() { <-l.slots[c] }, true
	default:
		return nil, false
	}
}

// retryAfterSeconds is the Retry-After of a request refused for the
// in-flight limits, as kube-apiserver's.
const retryAfterSeconds = 1

// tooManyRequests is kube-apiserver's refusal beyond the in-flight limits.
func tooManyRequests() error {
	return apierrors.NewTooManyRequests("Too many requests, please try again later.", retryAfterSeconds)
}

// requestTimeout returns how long a request may take: the server's limit, or
// less when the client asks for less with ?timeout=, as kube-apiserver.
func requestTimeout(r *http.Request, limit time.Duration) (time.Duration, error) {
	s := r.URL.Query().Get("timeout")
	if s == "" {
		return limit, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid timeout specified in the request URL: %q", s))
	}
	if d == 0 || d > limit {
		return limit, nil
	}
	return d, nil
}

// serveWithTimeout serves r through next, answering 504 with a Timeout
// Status when next has not answered within timeout, as kube-apiserver's
// timeout filter. next keeps running in the background until it returns;
// what it writes after the deadline is dropped. A response already begun at
// the deadline cannot become a 504: the connection (or HTTP/2 stream) is
// reset instead.
func serveWithTimeout(w http.ResponseWriter, r *http.Request, timeout time.Duration, next http.Handler) {
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	tw := &timeoutWriter{w: w, header: http.Header{}}
	done := make(chan struct{})
	var panicked any
	go func() {
		defer close(done)
		defer func() { panicked = recover() }()
		next.ServeHTTP(tw, r.WithContext(ctx))
	}()
	select {
	case <-done:
		if panicked != nil {
			panic(panicked)
		}
		return
	case <-ctx.Done():
	}
	if !tw.stop() {
		panic(http.ErrAbortHandler) // begun: reset the stream
	}
	if r.Context().Err() != nil {
		return // the client left
	}
	rest.WriteError(w, apierrors.NewTimeoutError(fmt.Sprintf(
		"request did not complete within requested timeout - %v", context.DeadlineExceeded), 0))
}

// timeoutWriter passes a handler's response through until stop. The handler
// writes headers into its own map, copied out when the response begins, so
// that a handler still running after the deadline touches nothing of the
// real response.
type timeoutWriter struct {
	w      http.ResponseWriter
	header http.Header

	mu      sync.Mutex
	stopped bool
	begun   bool
}

var errTimedOut = errors.New("the request timed out")

func (t *timeoutWriter) Header() http.Header { return t.header }

func (t *timeoutWriter) WriteHeader(code int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.beginLocked(code)
}

func (t *timeoutWriter) beginLocked(code int) {
	if t.stopped || t.begun {
		return
	}
	t.begun = true
	dst := t.w.Header()
	for k, v := range t.header {
		dst[k] = append([]string(nil), v...)
	}
	t.w.WriteHeader(code)
}

func (t *timeoutWriter) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return 0, errTimedOut
	}
	t.beginLocked(http.StatusOK)
	return t.w.Write(b)
}

// Flush implements http.Flusher.
func (t *timeoutWriter) Flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	if f, ok := t.w.(http.Flusher); ok {
		t.beginLocked(http.StatusOK)
		f.Flush()
	}
}

// stop ends the pass-through and reports whether the response was still
// untouched (a 504 can be written).
func (t *timeoutWriter) stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	return !t.begun
}

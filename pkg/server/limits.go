package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Limits bound what callers can make the endpoint hold. Zero fields take the defaults.
type Limits struct {
	// MaxRequestsInFlight bounds the requests served at once that end on their own (logs without follow,
	// pprof's snapshots); beyond it callers get 429 with Retry-After. Default 200.
	MaxRequestsInFlight int
	// MaxStreamsInFlight bounds the sessions open at once that last as long as the caller wants (exec,
	// attach, port-forward, followed logs, pprof's profile and trace). Default 100.
	MaxStreamsInFlight int
	// RequestTimeout bounds a request that ends on its own: its response must be written by then. Default
	// 60 s, kube-apiserver's --request-timeout.
	RequestTimeout time.Duration
}

const (
	defaultMaxRequestsInFlight = 200
	defaultMaxStreamsInFlight  = 100
	defaultRequestTimeout      = time.Minute
	// retryAfterSeconds is what a refused caller is told to wait, as kube-apiserver tells it.
	retryAfterSeconds = 1
	// Connection timeouts of both listeners: a caller has this long to send a request's headers, and an idle
	// keep-alive connection is closed after idleTimeout (upstream's kubelet: 90 s).
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 90 * time.Second
	maxHeaderBytes    = 1 << 20
	// writeGrace is how long after its deadline a request's response may still be written.
	writeGrace = 5 * time.Second
	// profileGrace is what a pprof profile or trace gets on top of the seconds it asks for.
	profileGrace = 30 * time.Second
)

func (l Limits) withDefaults() Limits {
	if l.MaxRequestsInFlight <= 0 {
		l.MaxRequestsInFlight = defaultMaxRequestsInFlight
	}
	if l.MaxStreamsInFlight <= 0 {
		l.MaxStreamsInFlight = defaultMaxStreamsInFlight
	}
	if l.RequestTimeout <= 0 {
		l.RequestTimeout = defaultRequestTimeout
	}
	return l
}

// longRunning says whether a request lasts as long as its caller wants, and so gets no deadline: streams
// (exec, attach, port-forward), followed logs, and pprof's profile and trace, which last the seconds they
// ask for (their deadline is that, plus profileGrace).
func longRunning(r *http.Request) (bool, time.Duration) {
	p := r.URL.Path
	switch {
	case isSubpath(p, "/exec"), isSubpath(p, "/attach"), isSubpath(p, "/portForward"), isSubpath(p, "/run"):
		return true, 0
	case isSubpath(p, "/containerLogs"):
		follow, _ := strconv.ParseBool(r.URL.Query().Get("follow"))
		return follow, 0
	case p == "/debug/pprof/profile" || p == "/debug/pprof/trace":
		secs, err := strconv.ParseInt(r.URL.Query().Get("seconds"), 10, 64)
		if err != nil || secs <= 0 {
			secs = 30 // pprof's default for profile; trace's is 1
			if strings.HasSuffix(p, "trace") {
				secs = 1
			}
		}
		return true, time.Duration(min(secs, 3600))*time.Second + profileGrace
	}
	return false, 0
}

// limiter admits requests up to the in-flight bounds and gives those that end on their own a deadline. Safe
// for concurrent use.
type limiter struct {
	limits           Limits
	requests, stream chan struct{}
}

func newLimiter(l Limits) *limiter {
	l = l.withDefaults()
	return &limiter{limits: l, requests: make(chan struct{}, l.MaxRequestsInFlight), stream: make(chan struct{}, l.MaxStreamsInFlight)}
}

// wrap serves next within the bounds: a caller beyond them gets 429 Too Many Requests with Retry-After; a
// request that ends on its own must finish within RequestTimeout (its context ends then, and so does the
// connection's write deadline).
func (l *limiter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		long, deadline := longRunning(r)
		slots := l.requests
		if long {
			slots = l.stream
		}
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		default:
			w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
			http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
			return
		}
		if !long {
			deadline = l.limits.RequestTimeout
		}
		if deadline > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), deadline)
			defer cancel()
			// The connection's write deadline comes a little later, so that a handler whose context ended
			// can still say why.
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(deadline + writeGrace))
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

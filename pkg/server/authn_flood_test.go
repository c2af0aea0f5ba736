package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testclock "k8s.io/utils/clock/testing"
)

// gatedReviews is an API server that answers TokenReviews only once released: it records how many it held at
// once and how many it was asked for each token. "good" authenticates, any other token is refused.
type gatedReviews struct {
	gate    chan struct{}
	now     atomic.Int32
	maxSeen atomic.Int32
	mu      sync.Mutex
	calls   map[string]int
}

func (g *gatedReviews) Create(ctx context.Context, r *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	n := g.now.Add(1)
	defer g.now.Add(-1)
	for {
		m := g.maxSeen.Load()
		if n <= m || g.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	g.mu.Lock()
	g.calls[r.Spec.Token]++
	g.mu.Unlock()
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := r.DeepCopy()
	if r.Spec.Token == "good" {
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "good"}}
	} else {
		out.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
	}
	return out, nil
}

func (g *gatedReviews) total() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.calls {
		n += c
	}
	return n
}

// A flood of distinct junk tokens costs the API server at most maxConcurrentTokenReviews reviews at a time;
// the callers beyond them are told to retry (429) after a short wait; a junk token seen again is answered from
// the cache; callers presenting one token at once share one review; a good token stays cached however many
// junk tokens follow it.
func TestTokenReviewFlood(t *testing.T) {
	clk := testclock.NewFakeClock(time.Now())
	g := &gatedReviews{gate: make(chan struct{}), calls: map[string]int{}}
	a := newAuthenticator(nil, g, clk)
	a.wait = 200 * time.Millisecond
	ctx := context.Background()

	close(g.gate) // the good token first, answered at once
	if u, err := a.reviewToken(ctx, "good"); err != nil || u.name != "good" {
		t.Fatalf("good token: %v, %v", u, err)
	}
	g.gate = make(chan struct{})

	const flood = 200
	var wg sync.WaitGroup
	errs := make([]error, flood)
	for i := range flood {
		wg.Go(func() { _, errs[i] = a.reviewToken(ctx, fmt.Sprintf("junk-%d", i)) })
	}
	// Every caller beyond the bound gives up after the wait; then the held reviews are answered.
	deadline := time.Now().Add(10 * time.Second)
	for g.now.Load() < maxConcurrentTokenReviews && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(a.wait + 100*time.Millisecond)
	close(g.gate)
	wg.Wait()

	tooMany, denied := 0, 0
	var reviewed []int
	for i, err := range errs {
		switch {
		case errors.Is(err, errTooManyReviews):
			tooMany++
		case err != nil && err.Error() == "invalid bearer token":
			denied++
			reviewed = append(reviewed, i)
		default:
			t.Errorf("junk-%d: %v", i, err)
		}
	}
	if got := g.maxSeen.Load(); got > maxConcurrentTokenReviews {
		t.Errorf("the API server held %d reviews at once, want at most %d", got, maxConcurrentTokenReviews)
	}
	if denied != maxConcurrentTokenReviews || tooMany != flood-maxConcurrentTokenReviews {
		t.Errorf("flood of %d: %d denied by a review, %d told to retry; want %d and %d", flood, denied, tooMany,
			maxConcurrentTokenReviews, flood-maxConcurrentTokenReviews)
	}

	// Junk seen again: from the cache, for the TTL; the good token too, after all that junk.
	before := g.total()
	for _, i := range reviewed {
		if _, err := a.reviewToken(ctx, fmt.Sprintf("junk-%d", i)); err == nil {
			t.Errorf("junk-%d authenticated from the cache", i)
		}
	}
	for i := range reviewCacheSize + 10 { // more denials than the cache holds
		a.denied.set(fmt.Sprintf("filler-%d", i), tokenAnswer{reason: "invalid bearer token"}, tokenCacheTTL)
	}
	if u, err := a.reviewToken(ctx, "good"); err != nil || u.name != "good" {
		t.Errorf("good token after the flood: %v, %v", u, err)
	}
	if g.total() != before {
		t.Errorf("repeated tokens cost %d more reviews, want none", g.total()-before)
	}
	clk.Step(tokenCacheTTL + time.Second)
	if _, err := a.reviewToken(ctx, fmt.Sprintf("junk-%d", reviewed[0])); err == nil || g.total() != before+1 {
		t.Errorf("junk after the TTL: %v, %d reviews, want one more", err, g.total()-before)
	}

	// Many callers with one token at once: one review.
	g.gate = make(chan struct{})
	for range 50 {
		wg.Go(func() { _, _ = a.reviewToken(ctx, "same-junk") })
	}
	time.Sleep(50 * time.Millisecond)
	close(g.gate)
	wg.Wait()
	if g.calls["same-junk"] != 1 {
		t.Errorf("50 callers with one token cost %d reviews, want 1", g.calls["same-junk"])
	}
}

// Without a client CA (a node joined to a cluster, no --client-ca-file) the endpoint neither asks for nor
// accepts client certificates, as upstream's kubelet; bearer tokens still authenticate. With one, a
// certificate of that CA does. A configuration that could authenticate nobody is refused.
func TestClientCertificatesNeedAClientCA(t *testing.T) {
	for _, tc := range []struct {
		name         string
		withCA       bool
		certCode     int // a certificate of the cluster CA, no token
		tokenCode    int // admin-token, no certificate
		certRequests bool
	}{
		{"client CA set", true, 200, 200, true},
		{"no client CA", false, 401, 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) {
				if !tc.withCA {
					c.ClientCA = nil
				}
			})
			url := "https://" + f.srv.Addr() + "/debug/pprof/"
			if code, _ := do(t, f.admin(), "GET", url, ""); code != tc.certCode {
				t.Errorf("admin certificate: %d, want %d", code, tc.certCode)
			}
			if code, _ := do(t, f.client(nil, ""), "GET", url, "admin-token"); code != tc.tokenCode {
				t.Errorf("admin token: %d, want %d", code, tc.tokenCode)
			}
			asked := false
			cfg := f.tlsConfig(nil, "")
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				asked = true
				return &tls.Certificate{}, nil
			}
			conn, err := tls.Dial("tcp", f.srv.Addr(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			conn.Close()
			if asked != tc.certRequests {
				t.Errorf("the endpoint asked for a client certificate: %v, want %v", asked, tc.certRequests)
			}
		})
	}
	if _, err := New(Config{Addr: "127.0.0.1:0", NodeName: "n", AccessReviews: newFakeReviews().access(),
		Pods: func(string, string) (*v1.Pod, bool) { return nil, false }, RootDir: t.TempDir()}); err == nil {
		t.Error("a server with neither a client CA nor a token reviewer was built")
	}
}

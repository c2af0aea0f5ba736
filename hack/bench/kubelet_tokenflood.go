package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// floodWorkers is how many callers send junk bearer tokens to the kubelet's endpoint at once.
const floodWorkers = 32

// runTokenFlood starts 30 pods at 10/s twice: once on a quiet node, once while callers flood the kubelet's
// endpoint with distinct junk bearer tokens (each one a TokenReview the kubelet cannot answer from its
// cache). The pods' create-to-Ready, which waits on the kubelet's status writes to the API server, is
// printed for both, with what the flood got: requests per second and how many were turned away (429).
func (b *kubeletBench) runTokenFlood(ctx context.Context) error {
	quiet := names("quiet", 30)
	progress("kubelet: 30 pods at 10/s, quiet")
	if _, err := b.createReady(ctx, "kubelet_tokenflood_off", quiet, 100*time.Millisecond, nil); err != nil {
		return err
	}
	if _, err := b.deleteGone(ctx, "kubelet_tokenflood_off_delete", quiet); err != nil {
		return err
	}
	progress("kubelet: 30 pods at 10/s, %d callers flooding :%d with junk tokens", floodWorkers, b.kl.port)
	fctx, stop := context.WithCancel(ctx)
	var sent, refused, throttled atomic.Int64
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, MaxIdleConnsPerHost: floodWorkers}} //nolint:gosec // a bench on loopback
	url := fmt.Sprintf("https://127.0.0.1:%d/pods", b.kl.port)
	t0 := time.Now()
	for i := 0; i < floodWorkers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := make([]byte, 24)
			for fctx.Err() == nil {
				_, _ = rand.Read(tok)
				req, err := http.NewRequestWithContext(fctx, http.MethodGet, url, nil)
				if err != nil {
					return
				}
				req.Header.Set("Authorization", "Bearer junk-"+hex.EncodeToString(tok))
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				sent.Add(1)
				switch resp.StatusCode {
				case http.StatusUnauthorized, http.StatusForbidden:
					refused.Add(1)
				case http.StatusTooManyRequests:
					throttled.Add(1)
				}
			}
		}()
	}
	flooded := names("flooded", 30)
	_, err := b.createReady(ctx, "kubelet_tokenflood_on", flooded, 100*time.Millisecond, nil)
	stop()
	wg.Wait()
	wall := time.Since(t0).Seconds()
	figure("kubelet_tokenflood_requests_per_second", float64(sent.Load())/wall, "req/s")
	figure("kubelet_tokenflood_refused_per_second", float64(refused.Load())/wall, "req/s")
	figure("kubelet_tokenflood_throttled_per_second", float64(throttled.Load())/wall, "req/s")
	if err != nil {
		return err
	}
	_, err = b.deleteGone(ctx, "kubelet_tokenflood_on_delete", flooded)
	return err
}

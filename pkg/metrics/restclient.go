package metrics

import (
	"context"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// client-go's request metrics, as upstream's component-base registers them.
var (
	restRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rest_client_requests_total",
		Help: "[ALPHA] Number of HTTP requests, partitioned by status code, method, and host."}, []string{"code", "method", "host"})
	restLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rest_client_request_duration_seconds",
		Help:    "[ALPHA] Request latency in seconds. Broken down by verb, and host.",
		Buckets: []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0}}, []string{"verb", "host"})
)

func registerRESTClientMetrics() {
	clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: resultAdapter{}, RequestLatency: latencyAdapter{}})
}

type resultAdapter struct{}

func (resultAdapter) Increment(_ context.Context, code, method, host string) {
	restRequests.WithLabelValues(code, method, host).Inc()
}

type latencyAdapter struct{}

func (latencyAdapter) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	restLatency.WithLabelValues(verb, u.Host).Observe(d.Seconds())
}

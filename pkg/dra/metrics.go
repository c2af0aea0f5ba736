package dra

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// durationBuckets are upstream's DRADurationBuckets.
var durationBuckets = prometheus.ExponentialBucketsRange(0.1, 40, 15)

// metrics are upstream's DRA metrics of the kubelet, with its names and labels.
type metrics struct {
	// operations is dra_operations_duration_seconds{operation_name, is_error}. Unlike upstream, whose label
	// is inverted ("true" for a success), is_error is "true" for a failure.
	operations *prometheus.HistogramVec
	// grpc is dra_grpc_operations_duration_seconds{driver_name, method_name, grpc_status_code}.
	grpc *prometheus.HistogramVec
}

func newMetrics() *metrics {
	return &metrics{
		operations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "dra", Name: "operations_duration_seconds",
			Help:    "[ALPHA] Latency histogram in seconds for the duration of handling all ResourceClaims referenced by a pod when the pod starts or stops. Identified by the name of the operation (PrepareResources or UnprepareResources) and separated by the success of the operation. The number of failed operations is provided through the histogram's overall count.",
			Buckets: durationBuckets}, []string{"operation_name", "is_error"}),
		grpc: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "dra", Name: "grpc_operations_duration_seconds",
			Help: "[ALPHA] Duration in seconds of the DRA gRPC operations", Buckets: durationBuckets},
			[]string{"driver_name", "method_name", "grpc_status_code"}),
	}
}

// observe records an operation ("PrepareResources", "UnprepareResources") that started at start.
func (mt *metrics) observe(operation string, start time.Time, err error) {
	mt.operations.WithLabelValues(operation, strconv.FormatBool(err != nil)).Observe(time.Since(start).Seconds())
}

// interceptor times a driver's gRPC calls.
func (mt *metrics) interceptor(driver string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		mt.grpc.WithLabelValues(driver, method, grpcCode(err)).Observe(time.Since(start).Seconds())
		return err
	}
}

// claimsInUseDesc is dra_resource_claims_in_use{driver_name}.
var claimsInUseDesc = prometheus.NewDesc("dra_resource_claims_in_use",
	"[ALPHA] The number of ResourceClaims that are currently in use on the node, by driver name (driver_name label value) and across all drivers (special value <any> for driver_name). Note that the sum of all by-driver counts is not the total number of in-use ResourceClaims because the same ResourceClaim might use devices from different drivers. Instead, use the count for the <any> driver_name.",
	[]string{"driver_name"}, nil)

// claimsCollector reports the prepared claims of the cache when scraped: only the drivers that have some,
// and <any> always.
type claimsCollector struct{ cache *claimCache }

func (c claimsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- claimsInUseDesc }

func (c claimsCollector) Collect(ch chan<- prometheus.Metric) {
	c.cache.mu.RLock()
	counts := c.cache.claimsInUse()
	c.cache.mu.RUnlock()
	for driver, n := range counts {
		ch <- prometheus.MustNewConstMetric(claimsInUseDesc, prometheus.GaugeValue, float64(n), driver)
	}
}

// register adds the metrics to reg.
func (mt *metrics) register(reg prometheus.Registerer, cache *claimCache) error {
	for _, c := range []prometheus.Collector{mt.operations, mt.grpc, claimsCollector{cache}} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

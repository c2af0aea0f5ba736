package remote

import (
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	cri "k8s.io/cri-api/pkg/apis"
	criclient "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
)

// DefaultTimeout bounds connecting and each unary call, as upstream's default runtime request timeout.
const DefaultTimeout = 2 * time.Minute

// Connect dials the CRI runtime at endpoint ("unix:///path" or a plain socket path) and returns its runtime
// and image services.
func Connect(endpoint string, timeout time.Duration) (cri.RuntimeService, cri.ImageManagerService, error) {
	if !strings.Contains(endpoint, "://") {
		endpoint = "unix://" + endpoint
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	logger := klog.Background()
	tp := noop.NewTracerProvider()
	rs, err := criclient.NewRemoteRuntimeService(endpoint, timeout, tp, &logger)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to CRI runtime %s: %w", endpoint, err)
	}
	is, err := criclient.NewRemoteImageService(endpoint, timeout, tp, &logger)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to CRI image service %s: %w", endpoint, err)
	}
	return rs, is, nil
}

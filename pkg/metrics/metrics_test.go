package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestImageSizeBucket(t *testing.T) {
	for size, want := range map[uint64]string{
		0: "0-10MB", 10<<20 - 1: "0-10MB", 10 << 20: "10MB-100MB", 499 << 20: "100MB-500MB", 1 << 30: "1GB-5GB",
		9 << 30: "5GB-10GB", 10 << 30: "10GB+", 1 << 40: "10GB+",
	} {
		if got := ImageSizeBucket(size); got != want {
			t.Errorf("ImageSizeBucket(%d) = %q, want %q", size, got, want)
		}
	}
}

// fakeRuntime answers the calls the tests make, failing StartContainer.
type fakeRuntime struct{ cri.RuntimeService }

func (fakeRuntime) StopContainer(context.Context, string, int64) error { return nil }
func (fakeRuntime) StartContainer(context.Context, string) error       { return errors.New("boom") }
func (fakeRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return nil, nil
}

// Every runtime call counts under upstream's operation name, and its errors apart.
func TestRuntimeCallsAreCounted(t *testing.T) {
	rt := Runtime{RuntimeService: fakeRuntime{}}
	ctx := context.Background()
	before := func(op string) (float64, float64) {
		return testutil.ToFloat64(RuntimeOperations.WithLabelValues(op)), testutil.ToFloat64(RuntimeOperationsErrors.WithLabelValues(op))
	}
	stop0, stopErr0 := before("stop_container")
	start0, startErr0 := before("start_container")
	list0, _ := before("list_containers")
	_ = rt.StopContainer(ctx, "c", 1)
	_ = rt.StopContainer(ctx, "c", 1)
	if err := rt.StartContainer(ctx, "c"); err == nil {
		t.Fatal("the runtime's error was not passed on")
	}
	_, _ = rt.ListContainers(ctx, nil)
	stop1, stopErr1 := before("stop_container")
	start1, startErr1 := before("start_container")
	list1, _ := before("list_containers")
	if stop1-stop0 != 2 || stopErr1 != stopErr0 {
		t.Errorf("stop_container: %v calls, %v errors; want 2 and 0", stop1-stop0, stopErr1-stopErr0)
	}
	if start1-start0 != 1 || startErr1-startErr0 != 1 {
		t.Errorf("start_container: %v calls, %v errors; want 1 and 1", start1-start0, startErr1-startErr0)
	}
	if list1-list0 != 1 {
		t.Errorf("list_containers: %v calls, want 1", list1-list0)
	}
}

// The registry /metrics serves has the kubelet's metrics under upstream's names, the node's name, and the
// process's collectors.
func TestRegistry(t *testing.T) {
	reg := Registry("node-a")
	RunningPods.Set(3)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range families {
		have[f.GetName()] = true
		if f.GetName() == "kubelet_node_name" && f.GetMetric()[0].GetLabel()[0].GetValue() != "node-a" {
			t.Errorf("kubelet_node_name: %v", f.GetMetric())
		}
	}
	for _, want := range []string{"kubelet_running_pods", "kubelet_node_name", "go_goroutines", "process_resident_memory_bytes"} {
		if !have[want] {
			t.Errorf("%s not gathered", want)
		}
	}
	if !strings.HasPrefix(PLEGRelistDuration.Desc().String(), `Desc{fqName: "kubelet_pleg_relist_duration_seconds"`) {
		t.Errorf("PLEG relist duration: %s", PLEGRelistDuration.Desc())
	}
}

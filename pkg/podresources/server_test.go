package podresources

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/nodeagent/kubelet/pkg/devicemanager/checkpoint"
)

type fakeDevices struct{}

// The GPUs g1 and g4 are on NUMA node 0, g2 on node 1, g5 on both, g3 on none; the NIC n1 on none.
func (fakeDevices) ContainerDevices(pod types.UID, container string) map[string]checkpoint.DevicesPerNUMA {
	if pod == "uid-gpu" && container == "main" {
		return map[string]checkpoint.DevicesPerNUMA{"example.com/gpu": {1: {"g2"}, 0: {"g4", "g1"}}, "example.com/nic": {checkpoint.NoNUMA: {"n1"}}}
	}
	return nil
}

func (fakeDevices) AllocatableDevices() map[string]map[string][]int64 {
	return map[string]map[string][]int64{"example.com/gpu": {"g1": {0}, "g2": {1}, "g3": nil, "g4": {0}, "g5": {0, 1}}}
}

// devicesString prints ContainerDevices as resource[ids]@node (no @ without topology), for comparison.
func devicesString(devs []*podresourcesapi.ContainerDevices) string {
	var out []string
	for _, d := range devs {
		s := d.ResourceName + fmt.Sprint(d.DeviceIds)
		for _, n := range d.GetTopology().GetNodes() {
			s += fmt.Sprintf("@%d", n.ID)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

type fakeDRA struct{}

func (fakeDRA) PodResources(pod *v1.Pod, container string) []*podresourcesapi.DynamicResource {
	if pod.UID == "uid-gpu" && container == "main" {
		return []*podresourcesapi.DynamicResource{{ClaimName: "gpu-claim", ClaimNamespace: "ml", ClaimResources: []*podresourcesapi.ClaimResource{
			{CdiDevices: []*podresourcesapi.CDIDevice{{Name: "example.com/gpu=g7"}}, DriverName: "example.com", PoolName: "node1", DeviceName: "g7"}}}}
	}
	return nil
}

func serve(t *testing.T) podresourcesapi.PodResourcesListerClient {
	t.Helper()
	always := v1.ContainerRestartPolicyAlways
	pods := []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: "ml", UID: "uid-gpu"}, Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "setup"}, {Name: "sidecar", RestartPolicy: &always}},
			Containers:     []v1.Container{{Name: "main"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "default", UID: "uid-plain"}, Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "app"}}}},
	}
	sock := filepath.Join(t.TempDir(), "pod-resources", "kubelet.sock")
	s, err := New(Config{Socket: sock, Pods: func() []*v1.Pod { return pods }, Devices: fakeDevices{}, DRA: fakeDRA{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if fi, err := os.Stat(sock); err == nil {
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("socket mode %v, want root's alone", fi.Mode().Perm())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no socket")
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return podresourcesapi.NewPodResourcesListerClient(conn)
}

func TestListGetAllocatable(t *testing.T) {
	c := serve(t)
	ctx := context.Background()
	list, err := c.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.PodResources) != 2 {
		t.Fatalf("%d pods, want 2", len(list.PodResources))
	}
	gpu := list.PodResources[0]
	// The sidecar and the app container; a plain init container is not listed, as upstream.
	if gpu.Name != "gpu" || gpu.Namespace != "ml" || len(gpu.Containers) != 2 || gpu.Containers[0].Name != "sidecar" || gpu.Containers[1].Name != "main" {
		t.Fatalf("pod %+v", gpu)
	}
	// One entry per resource and NUMA node, as upstream groups a container's devices.
	if got, want := devicesString(gpu.Containers[1].Devices), "example.com/gpu[g1 g4]@0 example.com/gpu[g2]@1 example.com/nic[n1]"; got != want {
		t.Errorf("main's devices %s, want %s", got, want)
	}
	if dr := gpu.Containers[1].DynamicResources; len(dr) != 1 || dr[0].ClaimName != "gpu-claim" || len(dr[0].ClaimResources) != 1 ||
		dr[0].ClaimResources[0].DeviceName != "g7" || dr[0].ClaimResources[0].CdiDevices[0].Name != "example.com/gpu=g7" {
		t.Errorf("main's claims %+v", dr)
	}
	if len(gpu.Containers[0].DynamicResources) != 0 {
		t.Errorf("the sidecar lists claims: %+v", gpu.Containers[0].DynamicResources)
	}
	if len(gpu.Containers[0].Devices) != 0 || len(list.PodResources[1].Containers[0].Devices) != 0 {
		t.Errorf("containers without devices list some: %+v", list.PodResources)
	}
	got, err := c.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodName: "gpu", PodNamespace: "ml"})
	if err != nil || got.PodResources.Name != "gpu" {
		t.Errorf("get: %+v %v", got, err)
	}
	if _, err := c.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodName: "gpu", PodNamespace: "default"}); status.Code(err) != codes.NotFound {
		t.Errorf("get a pod not here: %v, want NotFound", err)
	}
	alloc, err := c.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
	// One entry per device and NUMA node it is on, as upstream.
	want := "example.com/gpu[g1]@0 example.com/gpu[g2]@1 example.com/gpu[g3] example.com/gpu[g4]@0 example.com/gpu[g5]@0 example.com/gpu[g5]@1"
	if err != nil || devicesString(alloc.Devices) != want || len(alloc.CpuIds) != 0 {
		t.Errorf("allocatable: %s %v, want %s", devicesString(alloc.Devices), err, want)
	}
}

func TestRateLimited(t *testing.T) {
	c := serve(t)
	limited := 0
	for i := 0; i < 200; i++ {
		if _, err := c.List(context.Background(), &podresourcesapi.ListPodResourcesRequest{}); status.Code(err) == codes.ResourceExhausted {
			limited++
		}
	}
	if limited == 0 {
		t.Error("200 calls at once were all answered: no rate limit")
	}
}

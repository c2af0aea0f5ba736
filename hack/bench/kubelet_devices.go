package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// benchDeviceResource is the bench device plugin's resource: 120 healthy devices, each answered with an
// environment variable and a read-only mount, as a GPU plugin answers (minus the device node).
const (
	benchDeviceResource = "example.com/bench-dev"
	benchDevices        = 120
)

type benchDevicePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	mountSrc string
}

func (p *benchDevicePlugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	devs := make([]*pluginapi.Device, benchDevices)
	for i := range devs {
		devs[i] = &pluginapi.Device{ID: fmt.Sprintf("d%03d", i), Health: pluginapi.Healthy}
	}
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func (p *benchDevicePlugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs:   map[string]string{"BENCH_DEVICES": fmt.Sprint(c.DevicesIds)},
			Mounts: []*pluginapi.Mount{{ContainerPath: "/bench-dev", HostPath: p.mountSrc, ReadOnly: true}},
		})
	}
	return out, nil
}

// startBenchDevicePlugin serves the plugin beside the kubelet's registration socket and registers it.
func startBenchDevicePlugin(ctx context.Context, rootDir string) (func(), error) {
	dir := filepath.Join(rootDir, "device-plugins")
	mountSrc := filepath.Join(rootDir, "bench-dev")
	if err := os.WriteFile(mountSrc, []byte("device\n"), 0o644); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "bench.sock")
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, &benchDevicePlugin{mountSrc: mountSrc})
	go func() { _ = srv.Serve(l) }()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		srv.Stop()
		return nil, err
	}
	defer conn.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := pluginapi.NewRegistrationClient(conn).Register(rctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: "bench.sock", ResourceName: benchDeviceResource}); err != nil {
		srv.Stop()
		return nil, fmt.Errorf("register the bench device plugin: %w", err)
	}
	return srv.Stop, nil
}

// runDevices measures 30 pods at once each holding a device of a device plugin beside 30 bare pods,
// alternating which goes first, for b.rounds rounds: the device's cost (admission's allocation and the
// plugin's Allocate call, the checkpoint write, the mount) is the difference of the two p99s.
func (b *kubeletBench) runDevices(ctx context.Context, rootDir string) error {
	stop, err := startBenchDevicePlugin(ctx, rootDir)
	if err != nil {
		return err
	}
	defer stop()
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := b.client.CoreV1().Nodes().Get(ctx, benchNode, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if q := n.Status.Allocatable[benchDeviceResource]; q.Value() == benchDevices {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the node does not offer the bench devices: %v", n.Status.Allocatable)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var bare, devs []time.Duration
	defer func() { b.mutate = nil }()
	for round := 1; round <= b.rounds; round++ {
		order := []bool{false, true}
		if round%2 == 0 {
			order = []bool{true, false}
		}
		for _, withDevice := range order {
			kind := "bare"
			b.mutate = nil
			if withDevice {
				kind = "device"
				b.mutate = func(p *corev1.Pod) {
					p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{benchDeviceResource: *resource.NewQuantity(1, resource.DecimalSI)}
				}
			}
			label := fmt.Sprintf("kubelet_burst30_%s_round%d", kind, round)
			progress("kubelet: 30 pods at once, %s, round %d", kind, round)
			pods := names(fmt.Sprintf("%s%d", kind, round), 30)
			p99, err := b.burstP99(ctx, label, pods)
			if err != nil {
				return err
			}
			if withDevice {
				devs = append(devs, p99)
			} else {
				bare = append(bare, p99)
			}
			if _, err := b.deleteGone(ctx, label+"_delete", pods); err != nil {
				return err
			}
		}
	}
	mb, md := median(bare), median(devs)
	figure("kubelet_burst30_bare_p99_median", ms(mb), "ms")
	figure("kubelet_burst30_device_p99_median", ms(md), "ms")
	figure("kubelet_burst30_device_over_bare_p99", 100*(float64(md)-float64(mb))/float64(mb), "%")
	return nil
}

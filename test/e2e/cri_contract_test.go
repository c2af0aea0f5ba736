//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// streamingBackends are the backends whose Exec and Attach hand out streaming URLs: the built-in runtime
// through its socket (with its streaming server) and containerd's CRI plugin.
func streamingBackends(t *testing.T) []backend {
	return []backend{grpcBackend(t), remoteBackend(t)}
}

// stream runs a streaming session on a URL the runtime handed out.
func stream(ctx context.Context, rawURL string, opts remotecommand.StreamOptions) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, opts)
}

// Attach with stdin to a stdinOnce container: when the client's stdin ends, the container's stdin is closed,
// so `echo hi | crictl attach -i` ends with the container; a client that goes away leaves the call.
func TestAttachStdinOnce(t *testing.T) {
	for _, b := range streamingBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			p := runPod(t, b, "attach-once", nil)
			cfg := containerConfig("cat", "sh", "-c", "cat; echo stdin-closed")
			cfg.Stdin, cfg.StdinOnce = true, true
			id := p.start(t, cfg)
			resp, err := b.rt.Attach(ctxT(t), &runtimeapi.AttachRequest{ContainerId: id, Stdin: true, Stdout: true, Stderr: true})
			if err != nil {
				t.Fatalf("Attach: %v", err)
			}
			var out syncBuffer
			start := time.Now()
			ctx, cancel := context.WithTimeout(ctxT(t), 30*time.Second)
			defer cancel()
			err = stream(ctx, resp.Url, remotecommand.StreamOptions{Stdin: strings.NewReader("hi\n"), Stdout: &out, Stderr: &out})
			took := time.Since(start)
			if err != nil {
				t.Fatalf("attach session: %v (output %q)", err, out.String())
			}
			if out.String() != "hi\nstdin-closed\n" {
				t.Errorf("attach output %q, want the input echoed and the end of stdin seen", out.String())
			}
			if took > 3*time.Second {
				t.Errorf("the attach took %s to end after stdin closed", took)
			}
			eventually(t, 10*time.Second, "the container exited", func() error {
				st, err := b.rt.ContainerStatus(ctxT(t), id, false)
				if err != nil {
					return err
				}
				if s := st.GetStatus(); s.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || s.GetExitCode() != 0 {
					return fmt.Errorf("state %s exit %d", s.GetState(), s.GetExitCode())
				}
				return nil
			})
		})
	}
}

// A client that goes away from an attach session, from an exec of a shell (whose stdin then ends), or from a
// port-forward with a connection open frees what the runtime held for it; the container keeps running. An attach session lasts until the container
// exits or the client is gone, which the runtime learns when writing the container's next output fails (as
// containerd's CRI plugin does): the container here prints twice a second.
func TestStreamingDisconnectFreesGoroutines(t *testing.T) {
	b := grpcBackend(t) // in this process: its goroutines are counted
	p := runPod(t, b, "disconnect", nil)
	cfg := containerConfig("ticker", "sh", "-c", "while true; do echo tick; sleep 0.5; done")
	cfg.Stdin = true
	id := p.start(t, cfg)
	session := func(attach bool) {
		var rawURL string
		if attach {
			resp, err := b.rt.Attach(ctxT(t), &runtimeapi.AttachRequest{ContainerId: id, Stdin: true, Stdout: true, Stderr: true})
			if err != nil {
				t.Fatalf("Attach: %v", err)
			}
			rawURL = resp.Url
		} else {
			resp, err := b.rt.Exec(ctxT(t), &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"sh"}, Stdin: true, Stdout: true, Stderr: true})
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			rawURL = resp.Url
		}
		ctx, cancel := context.WithTimeout(ctxT(t), time.Second)
		defer cancel()
		stdin, hold := newBlockingReader()
		defer hold()
		_ = stream(ctx, rawURL, remotecommand.StreamOptions{Stdin: stdin, Stdout: &syncBuffer{}, Stderr: &syncBuffer{}})
	}
	// A port-forward whose client goes away with a connection open to the pod.
	forward := func() {
		resp, err := b.rt.PortForward(ctxT(t), &runtimeapi.PortForwardRequest{PodSandboxId: p.id, Port: []int32{8080}})
		if err != nil {
			t.Fatalf("PortForward: %v", err)
		}
		u, err := url.Parse(resp.Url)
		if err != nil {
			t.Fatal(err)
		}
		transport, upgrader, err := spdy.RoundTripperFor(&rest.Config{})
		if err != nil {
			t.Fatal(err)
		}
		stop, ready := make(chan struct{}), make(chan struct{})
		pf, err := portforward.NewOnAddresses(spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u),
			[]string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- pf.ForwardPorts() }()
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("port-forward: %v", err)
		}
		ports, err := pf.GetPorts()
		if err != nil || len(ports) != 1 {
			t.Fatalf("forwarded ports %v: %v", ports, err)
		}
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write([]byte("hello\n"))
		time.Sleep(200 * time.Millisecond)
		close(stop) // the client goes away mid-stream
		<-done
		conn.Close()
	}
	server := containerConfig("listener", "sh", "-c", "while true; do nc -l -p 8080 >/dev/null; done")
	p.start(t, server)
	session(true) // warm-up: connections and pools the first session opens stay
	session(false)
	forward()
	time.Sleep(time.Second)
	baseline := goruntime.NumGoroutine()
	for i := 0; i < 5; i++ {
		session(true)
		session(false)
		forward()
	}
	eventually(t, 20*time.Second, "goroutines back to the baseline", func() error {
		if n := goruntime.NumGoroutine(); n > baseline+3 {
			return fmt.Errorf("%d goroutines, baseline %d", n, baseline)
		}
		return nil
	})
	st, err := b.rt.ContainerStatus(ctxT(t), id, false)
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("the container after the sessions: %v %v", err, st.GetStatus().GetState())
	}
}

// newBlockingReader is a stdin that never ends until released.
func newBlockingReader() (*blockingReader, func()) {
	r := &blockingReader{release: make(chan struct{})}
	return r, func() { close(r.release) }
}

type blockingReader struct{ release chan struct{} }

func (r *blockingReader) Read([]byte) (int, error) {
	<-r.release
	return 0, fmt.Errorf("released")
}

// The CRI image calls accept every reference the runtime itself reports (the tag, a repo digest, the full
// and a short image ID); the sandbox image is pinned (busybox may be too: kubelets import it from the preload
// directory, which pins; a pulled image is not, see TestRegistryHostsConfig).
func TestImageReferenceForms(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			st, err := b.images.ImageStatus(ctxT(t), &runtimeapi.ImageSpec{Image: busyboxImage}, false)
			if err != nil || st.GetImage() == nil {
				t.Fatalf("ImageStatus %s: %v %v", busyboxImage, err, st)
			}
			img := st.GetImage()
			refs := []string{img.Id, strings.TrimPrefix(img.Id, "sha256:")[:12]}
			refs = append(refs, img.RepoDigests...)
			refs = append(refs, img.RepoTags...)
			for _, ref := range refs {
				got, err := b.images.ImageStatus(ctxT(t), &runtimeapi.ImageSpec{Image: ref}, false)
				if err != nil || got.GetImage().GetId() != img.Id {
					t.Errorf("ImageStatus %q: %v, image %q, want %q", ref, err, got.GetImage().GetId(), img.Id)
				}
			}
			if b.name == "cri-plugin" {
				return // its pause image here was imported, not pulled as the sandbox image: it is not pinned
			}
			list, err := b.images.ListImages(ctxT(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, i := range list {
				for _, tag := range i.RepoTags {
					if tag == pauseImage {
						found = true
						if !i.Pinned {
							t.Errorf("the sandbox image %s is not pinned", pauseImage)
						}
					}
				}
			}
			if !found {
				t.Errorf("the sandbox image %s is not listed", pauseImage)
			}
		})
	}
}

// The CRI's pod metrics, as critest v1.37.0 checks them ("runtime should support listing pod sandbox
// metrics"): the descriptors have help and label keys and name every series critest expects but those it
// lists as not implemented by all runtimes; a running pod's metrics carry each of them (block I/O only where
// a device was used) with one value per label key. Beyond critest: the values are the container's (a running
// process, memory in use, the start time, the pod's eth0 counters). Containerd 1.6's CRI plugin (the
// compatibility lane) has no such calls: it answers Unimplemented, and is checked only for that.
func TestPodSandboxMetrics(t *testing.T) {
	expected := []string{"container_cpu_cfs_periods_total", "container_cpu_cfs_throttled_periods_total",
		"container_cpu_cfs_throttled_seconds_total", "container_cpu_system_seconds_total", "container_cpu_usage_seconds_total",
		"container_cpu_user_seconds_total", "container_file_descriptors", "container_fs_inodes_free", "container_fs_inodes_total",
		"container_fs_limit_bytes", "container_fs_usage_bytes", "container_last_seen", "container_memory_cache",
		"container_memory_failcnt", "container_memory_failures_total", "container_memory_kernel_usage",
		"container_memory_mapped_file", "container_memory_max_usage_bytes", "container_memory_rss", "container_memory_swap",
		"container_memory_usage_bytes", "container_memory_working_set_bytes", "container_network_receive_bytes_total",
		"container_network_receive_errors_total", "container_network_receive_packets_dropped_total",
		"container_network_receive_packets_total", "container_network_transmit_bytes_total",
		"container_network_transmit_errors_total", "container_network_transmit_packets_dropped_total",
		"container_network_transmit_packets_total", "container_oom_events_total", "container_processes", "container_sockets",
		"container_spec_cpu_period", "container_spec_cpu_shares", "container_spec_memory_limit_bytes",
		"container_spec_memory_swap_limit_bytes", "container_start_time_seconds", "container_threads", "container_threads_max"}
	optional := []string{"container_blkio_device_usage_total", "container_fs_reads_bytes_total", "container_fs_reads_total",
		"container_fs_writes_bytes_total", "container_fs_writes_total"}
	forEachBackend(t, func(t *testing.T, b backend) {
		descs, err := b.rt.ListMetricDescriptors(ctxT(t))
		if b.name == "cri-plugin" && status.Code(err) == codes.Unimplemented {
			t.Logf("containerd's CRI plugin on this lane has no pod metrics: %v", err)
			return
		}
		if err != nil {
			t.Fatalf("ListMetricDescriptors: %v", err)
		}
		keys := map[string]int{}
		for _, d := range descs {
			if d.Help == "" || len(d.LabelKeys) == 0 {
				t.Errorf("descriptor %s: help %q label keys %v", d.Name, d.Help, d.LabelKeys)
			}
			keys[d.Name] = len(d.LabelKeys)
		}
		for _, name := range append(append([]string(nil), expected...), optional...) {
			if _, ok := keys[name]; !ok {
				t.Errorf("no descriptor for %s", name)
			}
		}
		p := runPod(t, b, "metrics", nil)
		cfg := containerConfig("metrics", "sh", "-c", "for i in 1 2 3; do echo hi >> /f$i; done; sync; sleep 3600")
		// critest's container's resources: the spec series are of what is set.
		cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{CpuPeriod: 100000,
			CpuQuota: 20000, CpuShares: 1024, MemoryLimitInBytes: 64 << 20, MemorySwapLimitInBytes: 64 << 20}}
		id := p.start(t, cfg)
		var pod *runtimeapi.PodSandboxMetrics
		eventually(t, 20*time.Second, "the pod's metrics", func() error {
			all, err := b.rt.ListPodSandboxMetrics(ctxT(t))
			if err != nil {
				return err
			}
			for _, m := range all {
				if m.PodSandboxId == p.id {
					pod = m
				}
			}
			if pod == nil || len(pod.ContainerMetrics) == 0 {
				return fmt.Errorf("no metrics for pod %s with its container yet", p.id)
			}
			return nil
		})
		values := map[string]uint64{}
		check := func(ms []*runtimeapi.Metric) {
			for _, m := range ms {
				n, ok := keys[m.Name]
				if !ok || len(m.LabelValues) != n {
					t.Errorf("%s: %d label values for %d keys", m.Name, len(m.LabelValues), n)
				}
				if _, seen := values[m.Name]; !seen {
					values[m.Name] = m.GetValue().GetValue()
				}
			}
		}
		check(pod.Metrics)
		for _, c := range pod.ContainerMetrics {
			if c.ContainerId != id {
				t.Errorf("metrics of container %s, want %s", c.ContainerId, id)
			}
			check(c.Metrics)
		}
		for _, name := range expected {
			if _, ok := values[name]; !ok {
				t.Errorf("the pod's metrics lack %s", name)
			}
		}
		if b.name == "cri-plugin" {
			return // containerd's values are its own; the checks above are critest's
		}
		start := values["container_start_time_seconds"]
		if values["container_processes"] < 1 || values["container_threads"] < 1 || values["container_memory_working_set_bytes"] == 0 ||
			values["container_fs_limit_bytes"] == 0 || start == 0 || time.Since(time.Unix(int64(start), 0)) > 5*time.Minute {
			t.Errorf("values: processes %d threads %d working set %d fs limit %d start %d",
				values["container_processes"], values["container_threads"], values["container_memory_working_set_bytes"],
				values["container_fs_limit_bytes"], start)
		}
	})
}

// A group without a user is refused, as the CRI requires; a create that fails after its snapshot was
// prepared (an unknown user) leaves no snapshot and no lease behind.
func TestCreateContainerFailures(t *testing.T) {
	client, err := containerd.New(containerdSock)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			p := runPod(t, b, "create-fails", nil)
			cfg := containerConfig("group-only", "true")
			cfg.Linux.SecurityContext = &runtimeapi.LinuxContainerSecurityContext{RunAsGroup: &runtimeapi.Int64Value{Value: 1000}}
			if _, err := b.rt.CreateContainer(ctxT(t), p.id, cfg, p.cfg); err == nil || !strings.Contains(err.Error(), "without") {
				t.Errorf("runAsGroup without a user: %v, want an error", err)
			}
			// A CDI device no spec describes (containerd's CRI plugin gained CDI in 1.7: the compatibility
			// lane's 1.6 ignores the field).
			if b.name == "builtin" {
				// A CDI spec that does not parse beside it: skipped (a log line), the error still names the
				// device, and containers without CDI devices are untouched.
				broken := "/var/run/cdi/nodeagent-e2e-broken.json"
				if err := os.MkdirAll("/var/run/cdi", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(broken, []byte(`{"cdiVersion": "0.6.0", "kind": `), 0o644); err != nil {
					t.Fatal(err)
				}
				defer os.Remove(broken)
				cdi := containerConfig("cdi-unknown", "true")
				cdi.CDIDevices = []*runtimeapi.CDIDevice{{Name: "example.com/none=dev0"}}
				if _, err := b.rt.CreateContainer(ctxT(t), p.id, cdi, p.cfg); err == nil ||
					!strings.Contains(err.Error(), `unresolvable CDI devices example.com/none=dev0`) {
					t.Errorf("an unknown CDI device: %v, want the device named in the error", err)
				}
				if id, err := b.rt.CreateContainer(ctxT(t), p.id, containerConfig("cdi-none", "true"), p.cfg); err != nil {
					t.Errorf("a container without CDI devices beside a broken CDI spec: %v", err)
				} else if err := b.rt.RemoveContainer(ctxT(t), id); err != nil {
					t.Errorf("remove: %v", err)
				}
			}

			// Any shared lease exists from here. (A long-lived container: stopping the sandbox of one whose task
			// is just exiting races its shim on containerd 1.6's CRI plugin.)
			p.start(t, containerConfig("warm", "sleep", "3600"))
			ctx := namespaces.WithNamespace(ctxT(t), b.ns)
			snapsBefore, leasesBefore := countSnapshots(t, ctx, client), countLeases(t, ctx, client)
			bad := containerConfig("unknown-user", "true")
			bad.Linux.SecurityContext = &runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "no-such-user"}
			if _, err := b.rt.CreateContainer(ctxT(t), p.id, bad, p.cfg); err == nil {
				t.Fatal("a container with an unknown user was created")
			}
			snaps, leases := countSnapshots(t, ctx, client), countLeases(t, ctx, client)
			switch {
			case b.name == "cri-plugin":
				// The reference, not held to it: the CRI plugin of the host's containerd (1.6) leaves the
				// snapshot of a failed create behind.
				t.Logf("containerd's CRI plugin after a failed create: %d snapshots (were %d), %d leases and leased resources (were %d)",
					snaps, snapsBefore, leases, leasesBefore)
			case snaps != snapsBefore || leases != leasesBefore:
				t.Errorf("after a failed create: %d snapshots (were %d), %d leases and leased resources (were %d)",
					snaps, snapsBefore, leases, leasesBefore)
			}
		})
	}
}

func countSnapshots(t *testing.T, ctx context.Context, c *containerd.Client) int {
	t.Helper()
	n := 0
	if err := c.SnapshotService("overlayfs").Walk(ctx, func(context.Context, snapshots.Info) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func countLeases(t *testing.T, ctx context.Context, c *containerd.Client) int {
	t.Helper()
	ls, err := c.LeasesService().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range ls {
		rs, err := c.LeasesService().ListResources(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		n += 1 + len(rs) // a lease, and what it holds
	}
	return n
}

//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// raw reads a path of the kubelet's endpoint through the API server's node proxy.
func (n *node) raw(t *testing.T, path string) []byte {
	t.Helper()
	data, err := n.proxyGet(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// proxyGet reads path of the node's endpoint through the API server's node proxy.
func (n *node) proxyGet(path string) ([]byte, error) {
	data, err := n.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", n.name, "proxy", path).DoRaw(context.Background())
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %s", path, err, data)
	}
	return data, nil
}

// metricNames parses a Prometheus text exposition and returns its families' names.
func metricNames(t *testing.T, data []byte) map[string]bool {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("parse metrics: %v", err)
	}
	out := map[string]bool{}
	for name := range fams {
		out[name] = true
	}
	return out
}

// cgroupFile reads a number from a file of the named container's cgroup in a v1 controller's hierarchy.
func cgroupFile(t *testing.T, pod *v1.Pod, container, controller, file string) uint64 {
	t.Helper()
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == container {
			v, err := strconv.ParseUint(readTrim(t, filepath.Join("/sys/fs/cgroup", controller, containerCgroup(t, pod, cs.ContainerID), file)), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no container %s", container)
	return 0
}

// The status endpoint as monitoring reads it, on both runtime backends: /stats/summary decoded into upstream's
// types with figures that match the cgroup files of a container holding 48 MiB and one burning a core,
// /metrics, /metrics/resource and /metrics/cadvisor parsed with Prometheus' parser, /pods, /runningpods/,
// /configz, /healthz, and kubectl top through the lightweight API server.
func TestKubeletStatusEndpoint(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		pod := busyboxPod("busy", "sh", "-c", "dd if=/dev/zero of=/dev/shm/fill bs=1M count=48 2>/dev/null; exec sleep 3600")
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "burn", Image: busyboxImage,
			Command: []string{"sh", "-c", "while :; do :; done"}})
		n.createPod(pod)
		p := n.waitPod("busy", 60*time.Second, "Ready", ready)

		// Two gatherings (10 s apart) give CPU rates; a third gives the rate beside the counter's change
		// between two gatherings the test saw, which it must match.
		var sum statsapi.Summary
		var mem, burn, before *statsapi.ContainerStats
		eventually(t, 60*time.Second, "two successive summaries with the pod's CPU rate", func() error {
			sum = statsapi.Summary{}
			if err := json.Unmarshal(n.raw(t, "stats/summary"), &sum); err != nil {
				return err
			}
			mem, burn = nil, nil
			for i := range sum.Pods {
				if sum.Pods[i].PodRef.Name != "busy" {
					continue
				}
				for j := range sum.Pods[i].Containers {
					switch c := &sum.Pods[i].Containers[j]; c.Name {
					case "main":
						mem = c
					case "burn":
						burn = c
					}
				}
			}
			if burn == nil || burn.CPU == nil || burn.CPU.UsageNanoCores == nil || mem == nil || mem.Memory == nil {
				return fmt.Errorf("not yet: %+v", sum.Pods)
			}
			if before == nil || !burn.CPU.Time.After(before.CPU.Time.Time) {
				if before == nil {
					before = burn
				}
				return fmt.Errorf("one gathering seen, at %v", before.CPU.Time)
			}
			return nil
		})
		// The cgroup files, read now: the summary's figures are at most one gathering (10 s) older.
		usage := cgroupFile(t, p, "main", "memory", "memory.usage_in_bytes")
		if ws := *mem.Memory.WorkingSetBytes; ws < 48<<20 || ws > usage+(4<<20) {
			t.Errorf("working set %d, want at least 48 MiB and at most the cgroup's usage %d", ws, usage)
		}
		cpu := cgroupFile(t, p, "burn", "cpuacct", "cpuacct.usage")
		// At most one gathering older: within 15 s of CPU of the cgroup's figure (compared
		// without subtracting, since the container may have used less than 15 s in all).
		if got := *burn.CPU.UsageCoreNanoSeconds; got > cpu || got+uint64(15*time.Second) < cpu {
			t.Errorf("CPU used %d ns, cgroup says %d ns", got, cpu)
		}
		// The rate is the counter's change over the gathering's window. The summary's times are whole seconds,
		// so the window seen here is within a second or so of the one the kubelet used. How much of a core the
		// loop gets depends on what else this host runs, so the figure is checked against the counter, and
		// only bounded by one core (a single thread) and well above none.
		cores := float64(*burn.CPU.UsageNanoCores) / 1e9
		window := burn.CPU.Time.Sub(before.CPU.Time.Time).Seconds()
		counted := float64(*burn.CPU.UsageCoreNanoSeconds-*before.CPU.UsageCoreNanoSeconds) / 1e9 / window
		if cores < 0.05 || cores > 1.1 || math.Abs(cores-counted) > 0.25*counted+0.02 {
			t.Errorf("the burning container uses %.2f cores by the summary, %.2f by its counter over %.0f s (want the same, at most one core)",
				cores, counted, window)
		}
		if sum.Node.Memory == nil || *sum.Node.Memory.WorkingSetBytes == 0 || sum.Node.Fs == nil || *sum.Node.Fs.CapacityBytes == 0 ||
			sum.Node.Runtime == nil || sum.Node.Runtime.ImageFs == nil || sum.Node.Rlimit == nil || sum.Node.Network == nil {
			t.Errorf("node stats incomplete: %+v", sum.Node)
		}
		for _, ps := range sum.Pods {
			if ps.PodRef.Name == "busy" && (ps.Network == nil || ps.Network.Name != "eth0" || ps.EphemeralStorage == nil ||
				ps.ProcessStats == nil || *ps.ProcessStats.ProcessCount < 2) {
				t.Errorf("pod stats incomplete: %+v", ps)
			}
		}
		if mem.Rootfs == nil || mem.Logs == nil {
			t.Errorf("container filesystem stats missing: rootfs %v logs %v", mem.Rootfs, mem.Logs)
		}

		// The metrics endpoints, with upstream's names.
		names := metricNames(t, n.raw(t, "metrics"))
		for _, want := range []string{"kubelet_pleg_relist_duration_seconds", "kubelet_pleg_relist_interval_seconds",
			"kubelet_pleg_last_seen_seconds", "kubelet_pod_start_duration_seconds", "kubelet_pod_start_sli_duration_seconds",
			"kubelet_pod_worker_duration_seconds", "kubelet_running_pods", "kubelet_running_containers",
			"kubelet_runtime_operations_total", "kubelet_runtime_operations_duration_seconds", "kubelet_started_containers_total",
			"kubelet_started_pods_total", "kubelet_node_name", "rest_client_requests_total", "go_goroutines",
			"process_resident_memory_bytes"} {
			if !names[want] {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		names = metricNames(t, n.raw(t, "metrics/resource"))
		for _, want := range []string{"node_cpu_usage_seconds_total", "node_memory_working_set_bytes", "pod_cpu_usage_seconds_total",
			"pod_memory_working_set_bytes", "container_cpu_usage_seconds_total", "container_memory_working_set_bytes",
			"container_start_time_seconds", "resource_scrape_error"} {
			if !names[want] {
				t.Errorf("/metrics/resource lacks %s", want)
			}
		}
		names = metricNames(t, n.raw(t, "metrics/cadvisor"))
		for _, want := range []string{"container_cpu_usage_seconds_total", "container_memory_working_set_bytes",
			"container_memory_rss", "container_network_receive_bytes_total", "container_fs_usage_bytes"} {
			if !names[want] {
				t.Errorf("/metrics/cadvisor lacks %s", want)
			}
		}

		var pods v1.PodList
		if err := json.Unmarshal(n.raw(t, "pods"), &pods); err != nil || len(pods.Items) == 0 {
			t.Errorf("/pods: %v %d pods", err, len(pods.Items))
		}
		if running := string(n.raw(t, "runningpods/")); !strings.Contains(running, `"name":"burn"`) {
			t.Errorf("/runningpods/ lacks the pod's container: %s", running)
		}
		if configz := string(n.raw(t, "configz")); !strings.Contains(configz, `"maxPods":110`) {
			t.Errorf("/configz: %s", configz)
		}
		if h := string(n.raw(t, "healthz")); h != "ok" {
			t.Errorf("/healthz: %q", h)
		}

		if n.cp == nil {
			// kubectl top reads metrics.k8s.io, which the API server scrapes from /metrics/resource every 15 s.
			eventually(t, 60*time.Second, "kubectl top pod shows the burning container", func() error {
				out, err := n.tryKubectl("top", "pod", "busy", "--containers", "--no-headers")
				if err != nil {
					return fmt.Errorf("%v: %s", err, out)
				}
				for _, line := range strings.Split(out, "\n") {
					f := strings.Fields(line)
					if len(f) >= 3 && f[1] == "burn" {
						if m, err := strconv.Atoi(strings.TrimSuffix(f[2], "m")); err == nil && m > 300 {
							return nil
						}
					}
				}
				return fmt.Errorf("no busy container: %s", out)
			})
			eventually(t, 30*time.Second, "kubectl top node", func() error {
				out, err := n.tryKubectl("top", "node", "--no-headers")
				if err != nil || !strings.HasPrefix(out, n.name+" ") {
					return fmt.Errorf("%v: %s", err, out)
				}
				return nil
			})
		}
	})
}

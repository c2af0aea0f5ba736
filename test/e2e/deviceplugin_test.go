//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// samplePluginPath is upstream's test device plugin, built by `hack/kube-binaries.sh sample-device-plugin`.
const samplePluginPath = "/var/lib/nodeagent/bin/sample-device-plugin"

// sampleResource is what upstream's sample device plugin serves: two devices, Dev-1 and Dev-2, whose
// Allocate answer mounts the file /tmp/<device> (which the plugin creates) into the container. With
// CDI_ENABLED it also writes a CDI spec (/var/run/cdi/example.com.json: an environment variable and a device
// node per device) and names the CDI device in its answer.
const sampleResource = "example.com/resource"

// Upstream's sample device plugin, run as a pod on the node as users run device plugins (privileged, the
// device plugins' directory as a hostPath), on both runtime backends: the node offers its two devices; a pod
// asking for one runs with the device's mount and the CDI device's edits (its environment and device node); a pod asking for more than are free is refused with
// upstream's UnexpectedAdmissionError; a restarted kubelet keeps the running container (not restarted) and its
// device, the plugin registers again and the next pod gets the other device; the plugin gone, the node
// offers no device while the running pod keeps its own; back, it registers again, and the devices the running
// pods hold stay theirs. The pod-resources API names the pod's device. Then
// the same on upstream's control plane (kube-apiserver, kube-controller-manager, kube-scheduler).
func TestDevicePlugin(t *testing.T) {
	parallel(t)
	if _, err := os.Stat(samplePluginPath); err != nil {
		t.Fatalf("upstream's sample device plugin: %v (build it with hack/kube-binaries.sh sample-device-plugin)", err)
	}
	forEachRuntime(t, testDevicePlugin)
	// The same on upstream's control plane, after the others (the plugins share the host's /tmp/Dev-N):
	// kube-scheduler counts the node's devices.
	t.Run("upstream-control-plane", func(t *testing.T) {
		testDevicePlugin(t, startNodeOn(t, privateControlPlane(t, "e2e-devices-node")))
	})
}

func testDevicePlugin(t *testing.T, n *node) {
	// The plugin creates /tmp/Dev-N in its container and answers that host path: it needs the host's /tmp.
	t.Cleanup(func() {
		for _, d := range []string{"Dev-1", "Dev-2"} {
			_ = os.Remove(filepath.Join("/tmp", d))
		}
		_ = os.Remove("/var/run/cdi/example.com.json")
	})
	n.createPod(devicePluginPod(n))
	waitDevices(t, n, 2, 2, time.Time{})

	consumer := devicePod(n, "consumer", 1)
	n.createPod(consumer)
	before := n.waitPod("consumer", 60*time.Second, "the pod with a device ready", ready)
	out := n.podLogs(t, "consumer", "main")
	if !strings.Contains(out, "/tmp/Dev-1") {
		t.Errorf("the container does not see its device's mount:\n%s", out)
	}
	if !strings.Contains(out, "CDI_DEVICE=CDI-Dev-1") || !regexp.MustCompile(`(?m)^b\S* /tmp/CDI-Dev-1$`).MatchString(out) {
		t.Errorf("the container lacks the CDI device's environment or device node:\n%s", out)
	}

	// The API server's placement counts the plugin's devices: a pod asking for more than are free stays
	// Pending (on a standalone node; bound by hand below, the kubelet's admission decides).
	unbound := devicePod(n, "unplaced", 2)
	unbound.Spec.NodeName = ""
	n.createPod(unbound)
	n.waitPod("unplaced", 30*time.Second, "Pending: one device free", pending("unplaced", "Insufficient example.com/resource"))

	// The pod-resources API, through upstream's generated client, as a monitoring agent reads it.
	checkPodResources(t, n)
	// The debug page names the plugin and its devices.
	if page, err := n.debugPods(); err != nil || len(page.Node.Devices) != 1 || page.Node.Devices[0].Name != sampleResource ||
		page.Node.Devices[0].Plugin == "" || page.Node.Devices[0].Healthy != 2 || page.Node.Devices[0].Held != 1 {
		t.Errorf("the debug page's devices: %+v %v", page.Node.Devices, err)
	}

	n.createPod(devicePod(n, "greedy", 2))
	p := n.waitPod("greedy", 30*time.Second, "the pod asking for more devices than are free refused", func(p *v1.Pod) error {
		if p.Status.Phase != v1.PodFailed {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	if want := "Allocate failed due to requested number of devices unavailable for example.com/resource. Requested: 2, Available: 1, which is unexpected"; p.Status.Reason != "UnexpectedAdmissionError" || p.Status.Message != want {
		t.Errorf("refused with %s: %q, want UnexpectedAdmissionError: %q", p.Status.Reason, p.Status.Message, want)
	}

	// A restarted kubelet: the running container keeps its device, the plugin registers again.
	// The Node's status is the restarted kubelet's once its heartbeat is newer than the restart (the
	// heartbeat has whole seconds); 2 allocatable then means the plugin has registered again.
	restarted := time.Now().Truncate(time.Second).Add(time.Second)
	n.restart()
	waitDevices(t, n, 2, 2, restarted)
	after := n.waitPod("consumer", 30*time.Second, "the pod with a device ready after the restart", ready)
	b, a := before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]
	if a.ContainerID != b.ContainerID || a.RestartCount != 0 {
		t.Errorf("the container changed across a kubelet restart: %s -> %s, restarts %d", b.ContainerID, a.ContainerID, a.RestartCount)
	}
	n.createPod(devicePod(n, "second", 1))
	n.waitPod("second", 60*time.Second, "a second pod with a device ready", ready)
	if out := n.podLogs(t, "second", "main"); !strings.Contains(out, "/tmp/Dev-2") {
		t.Errorf("the second pod does not have the other device (the restarted kubelet forgot the first's?):\n%s", out)
	}

	// The plugin gone: its devices are not offered; the running pods keep theirs.
	n.deletePodAndWait(t, "device-plugin")
	waitDevices(t, n, 2, 0, time.Time{})
	n.waitPod("consumer", 10*time.Second, "the pod with a device still ready", ready)

	// The plugin's pod back: it registers again and the node offers both devices; the kubelet still knows
	// both are held (the running pods keep theirs, a new pod finds none free).
	n.createPod(devicePluginPod(n))
	waitDevices(t, n, 2, 2, time.Time{})
	again := n.waitPod("consumer", 10*time.Second, "the pod with a device ready with the plugin back", ready)
	if a := again.Status.ContainerStatuses[0]; a.ContainerID != after.Status.ContainerStatuses[0].ContainerID || a.RestartCount != 0 {
		t.Errorf("the container changed when the plugin came back: %s, restarts %d", a.ContainerID, a.RestartCount)
	}
	n.createPod(devicePod(n, "late", 1))
	p = n.waitPod("late", 30*time.Second, "a pod asking for a held device refused", func(p *v1.Pod) error {
		if p.Status.Phase != v1.PodFailed {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	if p.Status.Reason != "UnexpectedAdmissionError" || !strings.Contains(p.Status.Message, "Available: 0") {
		t.Errorf("refused with %s: %q, want UnexpectedAdmissionError with none available", p.Status.Reason, p.Status.Message)
	}
}

// checkPodResources reads the node's pod-resources socket: the consumer's container holds Dev-1, and the
// node offers both devices.
func checkPodResources(t *testing.T, n *node) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(n.dir, "root", "pod-resources", "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := podresourcesapi.NewPodResourcesListerClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := client.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodName: "consumer", PodNamespace: "default"})
	if err != nil {
		t.Fatalf("pod-resources Get: %v", err)
	}
	if cs := got.PodResources.GetContainers(); len(cs) != 1 || len(cs[0].Devices) != 1 || cs[0].Devices[0].ResourceName != sampleResource ||
		strings.Join(cs[0].Devices[0].DeviceIds, ",") != "Dev-1" {
		t.Errorf("pod-resources Get consumer: %+v", got.PodResources)
	}
	list, err := client.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil || len(list.PodResources) != 2 { // the plugin's pod and the consumer
		t.Errorf("pod-resources List: %+v %v", list, err)
	}
	// One entry per device, as upstream (the sample plugin gives no NUMA topology).
	alloc, err := client.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
	if err != nil || len(alloc.Devices) != 2 || strings.Join(alloc.Devices[0].DeviceIds, ",") != "Dev-1" ||
		strings.Join(alloc.Devices[1].DeviceIds, ",") != "Dev-2" || alloc.Devices[0].Topology != nil {
		t.Errorf("pod-resources GetAllocatableResources: %+v %v", alloc, err)
	}
}

func devicePluginPod(n *node) *v1.Pod {
	p := busyboxPod("device-plugin", "/plugin/"+filepath.Base(samplePluginPath))
	p.Spec.NodeName = n.name
	p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "CDI_ENABLED", Value: "1"}}
	privileged := true
	p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: &privileged}
	dirOrCreate := v1.HostPathDirectoryOrCreate
	hostPath := func(name, path, mountPath string) {
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: &dirOrCreate}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: name, MountPath: mountPath})
	}
	hostPath("registration", filepath.Join(n.dir, "root", "device-plugins"), "/var/lib/kubelet/device-plugins")
	hostPath("plugin", filepath.Dir(samplePluginPath), "/plugin")
	hostPath("tmp", "/tmp", "/tmp")
	hostPath("cdi", "/var/run/cdi", "/var/run/cdi")
	return p
}

// devicePod asks for count of the sample plugin's devices, bound to the node by hand (the kubelet's
// admission decides), and lists the device files it sees.
func devicePod(n *node, name string, count int64) *v1.Pod {
	p := busyboxPod(name, "sh", "-c", `ls /tmp/Dev-* 2>&1; echo CDI_DEVICE=$CDI_DEVICE; stat -c "%A %n" /tmp/CDI-Dev-* 2>&1; exec sleep 3600`)
	p.Spec.NodeName = n.name
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{sampleResource: *resource.NewQuantity(count, resource.DecimalSI)}
	return p
}

// waitDevices waits until the Node lists capacity and allocatable devices of the sample resource in a
// status whose Ready heartbeat is not older than since.
func waitDevices(t *testing.T, n *node, capacity, allocatable int64, since time.Time) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("the node offering %d/%d devices", allocatable, capacity), func() error {
		node, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady && c.LastHeartbeatTime.Time.Before(since) {
				return fmt.Errorf("the status is older than %s", since.Format(time.RFC3339))
			}
		}
		c, a := node.Status.Capacity[sampleResource], node.Status.Allocatable[sampleResource]
		if c.Value() != capacity || a.Value() != allocatable {
			return fmt.Errorf("capacity %s allocatable %s", c.String(), a.String())
		}
		return nil
	})
}

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	csispec "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/internal/failpoint"
	"github.com/nodeagent/kubelet/test/csidriver"
)

// csiDriverName is the project's test CSI driver (test/csidriver), run as a pod on the node.
const csiDriverName = "hostpath.csi.nodeagent.dev"

var (
	csiDriverOnce sync.Once
	csiDriverDir  string
	csiDriverErr  error
)

// csiDriverBinary builds the test driver, static, into a directory of its own that driver pods mount.
func csiDriverBinary(t *testing.T) string {
	t.Helper()
	csiDriverOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nodeagent-e2e-csi")
		if err != nil {
			csiDriverErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "csi-hostpath"), "github.com/nodeagent/kubelet/test/csidriver/cmd/csi-hostpath")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			csiDriverErr = fmt.Errorf("build the test CSI driver: %v\n%s", err, out)
			return
		}
		csiDriverDir = dir
	})
	if csiDriverErr != nil {
		t.Fatal(csiDriverErr)
	}
	return csiDriverDir
}

// csiDriverPod is the test driver deployed as users deploy a CSI node plugin: privileged, its socket in
// <root>/plugins/<driver>, registering through <root>/plugins_registry, the kubelet's directory mounted at
// the same path with Bidirectional propagation (the driver mounts volumes there for the kubelet).
func csiDriverPod(t *testing.T, n *node, state, driver string) *v1.Pod {
	root := filepath.Join(n.dir, "root")
	p := busyboxPod("csi-driver", "/plugin/csi-hostpath", "--endpoint=unix:///csi/csi.sock", "--node-id="+n.name,
		"--driver-name="+driver, "--state-dir=/state", "--max-volumes-per-node=16", "--registration-dir=/registration",
		"--kubelet-registration-path="+filepath.Join(root, "plugins", driver, "csi.sock"))
	p.Spec.NodeName = n.name
	p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
	dirOrCreate := v1.HostPathDirectoryOrCreate
	bidirectional := v1.MountPropagationBidirectional
	mount := func(name, path, at string, propagation *v1.MountPropagationMode) {
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: &dirOrCreate}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: name, MountPath: at, MountPropagation: propagation})
	}
	mount("socket", filepath.Join(root, "plugins", driver), "/csi", nil)
	mount("registration", filepath.Join(root, "plugins_registry"), "/registration", nil)
	mount("kubelet", root, root, &bidirectional)
	mount("state", state, "/state", nil)
	mount("plugin", csiDriverBinary(t), "/plugin", nil)
	return p
}

// deployCSIDriver creates the CSIDriver object of the test driver under the name driver (attachRequired as
// attach) and its pod, and waits until the node's CSINode lists it. It returns the driver's state directory.
func deployCSIDriver(t *testing.T, n *node, driver string, attach bool) string {
	t.Helper()
	return deployCSIDriverWith(t, n, driver, storagev1.CSIDriverSpec{AttachRequired: ptr.To(attach), PodInfoOnMount: ptr.To(true),
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}})
}

// deployCSIDriverWith is deployCSIDriver with the CSIDriver's spec given.
func deployCSIDriverWith(t *testing.T, n *node, driver string, spec storagev1.CSIDriverSpec) string {
	t.Helper()
	ctx := context.Background()
	_, err := n.client.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driver}, Spec: spec},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	n.createPod(csiDriverPod(t, n, state, driver))
	// The pods using the driver's volumes go before the driver does (the node's cleanup deletes every pod at
	// once): a volume is torn down by its driver only.
	t.Cleanup(func() {
		pods, err := n.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, p := range pods.Items {
			if p.Name != "csi-driver" {
				_ = n.client.CoreV1().Pods("default").Delete(context.Background(), p.Name, metav1.DeleteOptions{})
			}
		}
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if pods, err := n.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{}); err == nil && len(pods.Items) <= 1 {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	waitCSINode(t, n, driver, true)
	return state
}

// waitCSINode waits until the node's CSINode lists the driver (or no longer does).
func waitCSINode(t *testing.T, n *node, driver string, listed bool) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("the CSINode listing the driver: %v", listed), func() error {
		cn, err := n.client.StorageV1().CSINodes().Get(context.Background(), n.name, metav1.GetOptions{})
		if err != nil {
			if !listed {
				return nil
			}
			return err
		}
		found := false
		for _, d := range cn.Spec.Drivers {
			if d.Name == driver {
				found = true
				if d.NodeID != n.name || d.Allocatable == nil || *d.Allocatable.Count != 16 {
					return fmt.Errorf("driver entry %+v", d)
				}
			}
		}
		if found != listed {
			return fmt.Errorf("drivers %+v", cn.Spec.Drivers)
		}
		return nil
	})
}

// createCSIClaim creates a static csi PersistentVolume of the test driver with the given handle and a claim
// bound to it, and returns the claim's name.
func (n *node) createCSIClaim(t *testing.T, name, handle, driver string, attrs ...string) string {
	t.Helper()
	attributes := map[string]string{"origin": "static"}
	for i := 0; i+1 < len(attrs); i += 2 {
		attributes[attrs[i]] = attrs[i+1]
	}
	ctx := context.Background()
	size := resource.MustParse("1Gi")
	class := "csi-static"
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name + "-pv"}, Spec: v1.PersistentVolumeSpec{
		Capacity: v1.ResourceList{v1.ResourceStorage: size}, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain, StorageClassName: class,
		ClaimRef: &v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: name},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driver,
			VolumeHandle: handle, VolumeAttributes: attributes}}}}
	if _, err := n.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeClaimSpec{
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: &class, VolumeName: pv.Name,
		Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: size}}}}
	if _, err := n.client.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// localEphemeralVolumePod returns a pod named name running script with a generic ephemeral volume
// "scratch" at /scratch, whose class binds on the first consumer and provisions nothing (as local volumes'),
// after creating two volumes of the driver in that class: pvName, with the handle, that only this node can
// use, and pvName-elsewhere, only another node.
func (n *node) localEphemeralVolumePod(t *testing.T, name, pvName, driver, handle, script string) *v1.Pod {
	t.Helper()
	ctx := context.Background()
	const class = "csi-local"
	_, err := n.client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	node, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct{ pv, host, handle string }{{pvName, node.Labels["kubernetes.io/hostname"], handle},
		{pvName + "-elsewhere", "another-node", handle + "-elsewhere"}} {
		if _, err := n.client.CoreV1().PersistentVolumes().Create(ctx, &v1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: v.pv}, Spec: v1.PersistentVolumeSpec{
				Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain, StorageClassName: class,
				NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
					{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{v.host}}}}}}},
				PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: v.handle}}}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p := busyboxPod(name, "sh", "-c", script)
	p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{
		VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{Spec: v1.PersistentVolumeClaimSpec{
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: ptr.To(class),
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}}}}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	return p
}

func claimPod(name, claim, script string) *v1.Pod {
	p := busyboxPod(name, "sh", "-c", script)
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return p
}

// csiMounts lists the host's mounts below the node's pods (publications) and its CSI global directory
// (stagings).
func csiMounts(t *testing.T, n *node) (published, staged []string) {
	root := filepath.Join(n.dir, "root")
	for _, m := range readHostNetState(t).mounts {
		switch {
		case strings.HasPrefix(m, filepath.Join(root, "pods")+"/") && strings.Contains(m, "/kubernetes.io~csi/"):
			published = append(published, m)
		case strings.HasPrefix(m, filepath.Join(root, "plugins", "kubernetes.io", "csi")+"/"):
			staged = append(staged, m)
		}
	}
	return published, staged
}

func waitCSIMounts(t *testing.T, n *node, published, staged int) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("%d published and %d staged CSI mounts on the host", published, staged), func() error {
		p, s := csiMounts(t, n)
		if len(p) != published || len(s) != staged {
			return fmt.Errorf("published %v, staged %v", p, s)
		}
		return nil
	})
}

// The project's test CSI driver, deployed as a pod the way users deploy CSI node plugins, on both runtime
// backends: it registers through the plugin registration directory and the node's CSINode lists it; a static
// csi PersistentVolume is staged once and published per pod (the mounts on the host, seen in
// /proc/self/mountinfo), its data outlives the pod that wrote it, a volume two pods share is unstaged only
// after the second pod goes; an inline ephemeral volume carries the pod's identity; a restarted kubelet
// leaves the mounts of running pods alone and tears down those of pods deleted meanwhile; a volume of a
// driver that never registered keeps its pod waiting with upstream's message. The pod's timeline on the
// debug page shows the driver's calls.
func TestCSIVolumes(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		state := deployCSIDriver(t, n, csiDriverName, false)
		if cn, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{}); err != nil ||
			!strings.Contains(cn.Annotations["csi.volume.kubernetes.io/nodeid"], `"`+csiDriverName+`":"`+n.name+`"`) {
			t.Errorf("the node's nodeid annotation: %v %v", cn.Annotations, err)
		}

		// A pod writes to a static volume; the volume is staged and published.
		claim := n.createCSIClaim(t, "data", "static-1", csiDriverName)
		n.createPod(claimPod("writer", claim, "echo hello > /data/file && exec sleep 3600"))
		n.waitPod("writer", 60*time.Second, "the writer ready", ready)
		waitCSIMounts(t, n, 1, 1)
		// The pod's startup timeline on the debug page has each driver call with its time.
		if page, err := n.debugPods(); err != nil || findPod(page, "writer") == nil {
			t.Errorf("the debug page: %v", err)
		} else {
			var calls []string
			for _, s := range findPod(page, "writer").Timeline {
				if strings.HasPrefix(s.Name, "volume data: ") {
					calls = append(calls, strings.TrimPrefix(s.Name, "volume data: "))
				}
			}
			if strings.Join(calls, ",") != "NodeStageVolume,NodePublishVolume" {
				t.Errorf("the writer's timeline names the driver calls %v, want NodeStageVolume,NodePublishVolume", calls)
			}
		}
		if b, err := os.ReadFile(filepath.Join(state, "static-1", "file")); err != nil || string(b) != "hello\n" {
			t.Errorf("the driver's volume directory holds %q, %v", b, err)
		}

		// A second pod shares it: published twice, staged once. The first leaves: the staging stays.
		n.createPod(claimPod("reader", claim, "cat /data/file; exec sleep 3600"))
		n.waitPod("reader", 60*time.Second, "the reader ready", ready)
		if out := n.podLogs(t, "reader", "main"); out != "hello\n" {
			t.Errorf("the second pod reads %q", out)
		}
		waitCSIMounts(t, n, 2, 1)

		// The driver's NodeGetVolumeStats in /stats/summary and as upstream's kubelet_volume_stats_*.
		eventually(t, 40*time.Second, "the reader's CSI volume in /stats/summary", func() error {
			var sum statsapi.Summary
			if err := json.Unmarshal(n.raw(t, "stats/summary"), &sum); err != nil {
				return err
			}
			for _, p := range sum.Pods {
				for _, v := range p.VolumeStats {
					if p.PodRef.Name == "reader" && v.Name == "data" {
						if v.PVCRef == nil || v.PVCRef.Name != claim || v.CapacityBytes == nil || *v.CapacityBytes == 0 || v.UsedBytes == nil {
							return fmt.Errorf("volume stats %+v", v)
						}
						return nil
					}
				}
			}
			return fmt.Errorf("no stats of the reader's volume")
		})
		if m := string(n.raw(t, "metrics")); !strings.Contains(m, `kubelet_volume_stats_capacity_bytes{namespace="default",persistentvolumeclaim="`+claim+`"}`) {
			t.Errorf("/metrics lacks the claim's kubelet_volume_stats_capacity_bytes")
		}
		n.deletePodAndWait(t, "writer")
		waitCSIMounts(t, n, 1, 1)

		// A restarted kubelet leaves the running pod's volume mounted and its container running.
		before := n.waitPod("reader", 10*time.Second, "the reader ready", ready)
		n.restart()
		waitCSINode(t, n, csiDriverName, true)
		after := n.waitPod("reader", 60*time.Second, "the reader ready after the restart", ready)
		if a, b := after.Status.ContainerStatuses[0], before.Status.ContainerStatuses[0]; a.ContainerID != b.ContainerID || a.RestartCount != 0 {
			t.Errorf("the reader's container changed across the restart: %s -> %s", b.ContainerID, a.ContainerID)
		}
		// (Through the API server, which reaches the restarted kubelet once its Node names its new port.)
		eventually(t, 30*time.Second, "the volume in the running pod after the restart", func() error {
			if out, err := n.exec("reader", "main", "cat", "/data/file"); err != nil || out != "hello\n" {
				return fmt.Errorf("%q, %v", out, err)
			}
			return nil
		})
		waitCSIMounts(t, n, 1, 1)

		// The last pod gone: unpublished and unstaged.
		n.deletePodAndWait(t, "reader")
		waitCSIMounts(t, n, 0, 0)

		// An inline ephemeral volume: the driver is told the pod's identity; the volume goes with the pod.
		inline := busyboxPod("inline", "sh", "-c", "echo scratch > /scratch/f && cat /scratch/f && exec sleep 3600")
		inline.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: csiDriverName}}}}
		inline.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
		n.createPod(inline)
		n.waitPod("inline", 60*time.Second, "the pod with an inline volume ready", ready)
		waitCSIMounts(t, n, 1, 0)
		n.deletePodAndWait(t, "inline")
		waitCSIMounts(t, n, 0, 0)

		// A generic ephemeral volume: the ephemeral volume controller makes the claim <pod>-<volume> owned by
		// the pod; its class waits for the first consumer, so placement binds it to the local volume of the
		// driver that this node can use (and not the one of another node), the pod runs with it, and the claim
		// goes with the pod.
		generic := n.localEphemeralVolumePod(t, "generic", "generic-pv", csiDriverName, "generic-1",
			"echo generic > /scratch/f && exec sleep 3600")
		n.createPod(generic)
		gp := n.waitPod("generic", 60*time.Second, "the pod with a generic ephemeral volume ready", ready)
		if c, err := n.client.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), "generic-scratch", metav1.GetOptions{}); err != nil ||
			!metav1.IsControlledBy(c, gp) || c.Spec.VolumeName != "generic-pv" {
			t.Errorf("the generic ephemeral volume's claim: %v (owned by the pod: %v)", err, err == nil && metav1.IsControlledBy(c, gp))
		}
		if pv, err := n.client.CoreV1().PersistentVolumes().Get(context.Background(), "generic-pv-elsewhere", metav1.GetOptions{}); err != nil || pv.Spec.ClaimRef != nil {
			t.Errorf("the volume of another node: %v, bound to %+v", err, pv.Spec.ClaimRef)
		}
		if b, err := os.ReadFile(filepath.Join(state, "generic-1", "f")); err != nil || string(b) != "generic\n" {
			t.Errorf("the generic ephemeral volume's data: %q, %v", b, err)
		}
		n.deletePodAndWait(t, "generic")
		waitCSIMounts(t, n, 0, 0)
		eventually(t, 30*time.Second, "the claim deleted with its pod", func() error {
			_, err := n.client.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), "generic-scratch", metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("the claim is still there")
			}
			return nil
		})

		// A volume of a driver that never registered: the pod waits, with upstream's message.
		pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "missing-pv"}, Spec: v1.PersistentVolumeSpec{
			Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			StorageClassName: "csi-static", ClaimRef: &v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: "missing"},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "missing.csi.example.com", VolumeHandle: "x"}}}}
		if _, err := n.client.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		class := "csi-static"
		if _, err := n.client.CoreV1().PersistentVolumeClaims("default").Create(context.Background(), &v1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "missing"}, Spec: v1.PersistentVolumeClaimSpec{AccessModes: pv.Spec.AccessModes,
				StorageClassName: &class, VolumeName: pv.Name, Resources: v1.VolumeResourceRequirements{Requests: pv.Spec.Capacity}}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		n.createPod(claimPod("waiting", "missing", "sleep 3600"))
		n.waitPod("waiting", 60*time.Second, "the pod of an unregistered driver waiting", func(p *v1.Pod) error {
			for _, e := range n.events(t, "waiting") {
				if e.Reason == "FailedMount" && strings.Contains(e.Message, "driver name missing.csi.example.com not found in the list of registered CSI drivers") {
					return nil
				}
			}
			return fmt.Errorf("phase %s, no FailedMount event naming the driver", p.Status.Phase)
		})
		n.deletePodAndWait(t, "waiting")

		// A driver that fails the publication: the pod waits with the driver's error, in upstream's words,
		// and is retried; deleted, its volume (staged before the failure) is unstaged.
		failing := n.createCSIClaim(t, "failing", "failing-1", csiDriverName, csidriver.FailPublishKey, "disk on fire")
		n.createPod(claimPod("failing", failing, "sleep 3600"))
		n.waitPod("failing", 60*time.Second, "the pod whose publication fails, waiting and retried", func(p *v1.Pod) error {
			for _, e := range n.events(t, "failing") {
				if e.Reason == "FailedMount" && strings.Contains(e.Message, `MountVolume.SetUp failed for volume "data" : rpc error: code = Internal desc = disk on fire`) &&
					e.Count >= 2 {
					return nil
				}
			}
			return fmt.Errorf("phase %s, no repeated FailedMount event with the driver's error", p.Status.Phase)
		})
		n.deletePodAndWait(t, "failing")
		waitCSIMounts(t, n, 0, 0)

		// The driver gone: deregistered from the CSINode.
		n.deletePodAndWait(t, "csi-driver")
		waitCSINode(t, n, csiDriverName, false)
	})
}

// The test driver's pod restarted while a volume is mounted: the mounts stay, the driver registers again
// and a new pod mounts the volume. The kubelet SIGKILLed while pods use the volume, and the pods deleted
// while it is down: once it is back, the volume is unpublished and unstaged (from the records on disk),
// and the driver's data is intact. The API server runs on its own, so it stays up while the kubelet is down.
// A hung publish call keeps only its pod waiting, named on the debug page, until its deadline; the kubelet
// killed in the middle of the call calls the driver again once it is back. A volume
// whose data goes away is reported abnormal (CSIVolumeHealth).
func TestCSIFaults(t *testing.T) {
	parallel(t)
	nodeKC := filepath.Join(t.TempDir(), "node.kubeconfig")
	// The API server reaches the kubelet (the debug page, below) on loopback, whatever resolves the node's name.
	api := startAPIServer(t, "", "--node-kubeconfig", "e2e-node="+nodeKC, "--kubelet-host", "e2e-node=127.0.0.1")
	eventually(t, 30*time.Second, "the node kubeconfig", func() error { _, err := os.Stat(nodeKC); return err })
	n := startNodeJoining(t, api, nodeKC)
	state := deployCSIDriver(t, n, csiDriverName, false)
	claim := n.createCSIClaim(t, "data", "faults-1", csiDriverName)
	first := claimPod("first", claim, "echo kept > /data/file && exec sleep 3600")
	first.Spec.NodeName = n.name
	n.createPod(first)
	firstUID := n.waitPod("first", 60*time.Second, "the first pod ready", ready).UID
	waitCSIMounts(t, n, 1, 1)

	// The driver's pod replaced: its socket goes and comes back; the mounts stay.
	n.deletePodAndWait(t, "csi-driver")
	waitCSINode(t, n, csiDriverName, false)
	if p, s := csiMounts(t, n); len(p) != 1 || len(s) != 1 {
		t.Errorf("the driver's restart took mounts away: published %v, staged %v", p, s)
	}
	n.createPod(csiDriverPod(t, n, state, csiDriverName))
	waitCSINode(t, n, csiDriverName, true)
	// (Ready only with the first pod's data: a joining node's logs are not read through this API server.)
	second := claimPod("second", claim, `test "$(cat /data/file)" = kept || exit 1; exec sleep 3600`)
	second.Spec.NodeName = n.name
	n.createPod(second)
	p := n.waitPod("second", 60*time.Second, "a pod reading the volume after the driver's restart", ready)
	if rc := p.Status.ContainerStatuses[0].RestartCount; rc != 0 {
		t.Errorf("the second pod's container restarted %d times (it did not read the first pod's data)", rc)
	}
	waitCSIMounts(t, n, 2, 1)

	// The kubelet killed; both pods deleted at once while it is down.
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	if !n.exited(30 * time.Second) {
		t.Fatal("the kubelet did not die")
	}
	for _, name := range []string{"first", "second"} {
		if err := n.client.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	// Restarted with its stage and publish calls timing out after 15 s instead of 2 minutes, for the hung
	// driver below, and with volume health (CSIVolumeHealth) asked every 5 s.
	cfg := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+
		"featureGates: {CSIVolumeHealth: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.args = append(n.args, "--config", cfg)
	n.start(failpoint.EnvVar + "=" + failpoint.CSICallTimeout + "=15s," + failpoint.StatsFSInterval + "=5s")
	waitCSIMounts(t, n, 0, 0)
	if b, err := os.ReadFile(filepath.Join(state, "faults-1", "file")); err != nil || string(b) != "kept\n" {
		t.Errorf("the driver's data after the teardown: %q, %v", b, err)
	}
	// The deleted pods' directories go once their volumes are torn down.
	for _, uid := range []string{string(firstUID), string(p.UID)} {
		eventually(t, 30*time.Second, "the deleted pods' directories removed", func() error {
			if _, err := os.Stat(filepath.Join(n.dir, "root", "pods", uid)); !os.IsNotExist(err) {
				return fmt.Errorf("pod directory %s: %v", uid, err)
			}
			return nil
		})
	}

	// A publish call that hangs (the test driver waits for a file of its state directory): the pod waits, the
	// debug page names the call under way, the node stays Ready and another pod starts meanwhile; the call
	// fails at its deadline (the pod's FailedMount event), and once the driver answers the pod runs.
	hungClaim := n.createCSIClaim(t, "hung", "hung-1", csiDriverName, csidriver.HangPublishKey, "release-hung")
	hung := claimPod("hung", hungClaim, "exec sleep 3600")
	hung.Spec.NodeName = n.name
	n.createPod(hung)
	eventually(t, 30*time.Second, "the debug page naming the hung call", func() error {
		page, err := n.debugPods()
		if err != nil {
			return err
		}
		want := `NodePublishVolume of volume "data" (CSI driver ` + csiDriverName + `), under way for`
		if p := findPod(page, "hung"); p == nil || !strings.Contains(p.WaitingFor, want) {
			return fmt.Errorf("the pod's entry %+v, want waiting for %q", p, want)
		}
		return nil
	})
	plain := busyboxPod("plain", "sleep", "3600")
	plain.Spec.NodeName = n.name
	n.createPod(plain)
	n.waitPod("plain", 30*time.Second, "another pod ready while a driver call hangs", ready)
	if nd, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{}); err != nil || nodeReady(nd) != nil {
		t.Errorf("the node is not Ready while a driver call hangs: %v", err)
	}
	n.waitPod("hung", 45*time.Second, "the hung call failed at its deadline", func(p *v1.Pod) error {
		for _, e := range n.events(t, "hung") {
			if e.Reason == "FailedMount" && strings.Contains(e.Message, "DeadlineExceeded") {
				return nil
			}
		}
		return fmt.Errorf("phase %s, events %v", p.Status.Phase, eventReasons(n.events(t, "hung")))
	})
	// The kubelet killed in the middle of the retried call: started again, it calls the driver again (the
	// volume's record was written before the first call), and once the driver answers the pod runs.
	eventually(t, 60*time.Second, "the retried call under way", func() error {
		page, err := n.debugPods()
		if err != nil {
			return err
		}
		if p := findPod(page, "hung"); p == nil || !strings.Contains(p.WaitingFor, "NodePublishVolume") {
			return fmt.Errorf("the pod's entry %+v", p)
		}
		return nil
	})
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	if !n.exited(30 * time.Second) {
		t.Fatal("the kubelet did not die")
	}
	n.start(failpoint.EnvVar + "=" + failpoint.CSICallTimeout + "=15s," + failpoint.StatsFSInterval + "=5s")
	if err := os.WriteFile(filepath.Join(state, "release-hung"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n.waitPod("hung", 60*time.Second, "the pod ready once the driver answers", ready)
	if p := n.waitPod("plain", 30*time.Second, "the other pod kept across the restart", ready); p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the other pod's container restarted across the kubelet's restart")
	}

	// The volume's data taken away under the running pod: its driver reports it inaccessible
	// (NodeGetVolumeHealth), which the pod's VolumeConditionAbnormal event and
	// kubelet_volume_stats_health_status_abnormal say, as upstream's kubelet with CSIVolumeHealth.
	healthy := `kubelet_volume_stats_health_status_abnormal{namespace="default",persistentvolumeclaim="hung"} 0`
	eventually(t, 30*time.Second, "the volume's health in the metrics", func() error {
		if !strings.Contains(string(n.raw(t, "metrics")), healthy) {
			return fmt.Errorf("no %s", healthy)
		}
		return nil
	})
	data := filepath.Join(state, "hung-1")
	if err := os.Rename(data, data+".away"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Rename(data+".away", data) }) // back before the teardown
	eventually(t, 30*time.Second, "the abnormal volume's event and metric", func() error {
		found := false
		for _, e := range n.events(t, "hung") {
			if e.Reason == "VolumeConditionAbnormal" && strings.Contains(e.Message, "Volume data: ") && strings.Contains(e.Message, "is gone") {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("events %v", eventReasons(n.events(t, "hung")))
		}
		if m := strings.Replace(healthy, "} 0", "} 1", 1); !strings.Contains(string(n.raw(t, "metrics")), m) {
			return fmt.Errorf("no %s", m)
		}
		return nil
	})
	if err := os.Rename(data+".away", data); err != nil {
		t.Fatal(err)
	}
}

// A driver whose CSIDriver says attachRequired: the API server's attach/detach controller creates the
// VolumeAttachment of the volume to the node (upstream's name), the pod waits with the volume not attached
// until the attachment reports attached (the test plays the external attacher's part for a driver without
// ControllerPublishVolume: it marks the attachment attached, with metadata), then runs; the node reports the
// volume in status.volumesInUse while it is mounted; after the pod, the attachment goes.
func TestCSIAttachRequired(t *testing.T) {
	parallel(t)
	n := startNode(t)
	ctx := context.Background()
	const driver = "attach.csi.nodeagent.dev"
	deployCSIDriver(t, n, driver, true)
	claim := n.createCSIClaim(t, "att", "att-1", driver)
	n.createPod(claimPod("attached", claim, "exec sleep 3600"))
	var va *storagev1.VolumeAttachment
	eventually(t, 60*time.Second, "the VolumeAttachment of the pod's volume", func() error {
		list, err := n.client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d attachments", len(list.Items))
		}
		va = &list.Items[0]
		if a := va.Spec; a.Attacher != driver || a.NodeName != n.name || a.Source.PersistentVolumeName == nil || *a.Source.PersistentVolumeName != claim+"-pv" {
			return fmt.Errorf("attachment spec %+v", a)
		}
		return nil
	})
	n.waitPod("attached", 30*time.Second, "the pod waiting for the attachment", func(p *v1.Pod) error {
		for _, e := range n.events(t, "attached") {
			if e.Reason == "FailedMount" && strings.Contains(e.Message, "is not attached to this node yet") {
				return nil
			}
		}
		return fmt.Errorf("phase %s, no FailedMount event saying the volume is not attached", p.Status.Phase)
	})
	va.Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"device": "/dev/fake"}}
	if _, err := n.client.StorageV1().VolumeAttachments().UpdateStatus(ctx, va, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitPod("attached", 60*time.Second, "the pod ready once its volume is attached", ready)
	unique := v1.UniqueVolumeName("kubernetes.io/csi/" + driver + "^att-1")
	inUse := func(want bool) {
		eventually(t, 60*time.Second, fmt.Sprintf("the node reporting the volume in use: %v", want), func() error {
			node, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := slices.Contains(node.Status.VolumesInUse, unique); got != want {
				return fmt.Errorf("volumesInUse %v", node.Status.VolumesInUse)
			}
			return nil
		})
	}
	inUse(true)
	n.deletePodAndWait(t, "attached")
	inUse(false)
	eventually(t, 60*time.Second, "the attachment deleted", func() error {
		list, err := n.client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 0 {
			return fmt.Errorf("%d attachments, %v", len(list.Items), err)
		}
		return nil
	})
}

// A raw block volume of the test driver (created through its controller service, as external-provisioner
// would, an image file on a loop device), on both runtimes: a pod writes to the device at its devicePath,
// a second pod reads what the first wrote, and after the pods the device is unpublished and unstaged (the
// loop device detached).
func TestCSIBlockVolume(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		ctx := context.Background()
		deployCSIDriver(t, n, csiDriverName, false)
		conn, err := grpc.NewClient("unix://"+filepath.Join(n.dir, "root", "plugins", csiDriverName, "csi.sock"),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		blockCap := &csispec.VolumeCapability{AccessType: &csispec.VolumeCapability_Block{Block: &csispec.VolumeCapability_BlockVolume{}},
			AccessMode: &csispec.VolumeCapability_AccessMode{Mode: csispec.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		created, err := csispec.NewControllerClient(conn).CreateVolume(cctx, &csispec.CreateVolumeRequest{Name: "blk-1",
			CapacityRange: &csispec.CapacityRange{RequiredBytes: 16 << 20}, VolumeCapabilities: []*csispec.VolumeCapability{blockCap}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		block := v1.PersistentVolumeBlock
		size := resource.MustParse("16Mi")
		class := "csi-block"
		pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "blk-pv"}, Spec: v1.PersistentVolumeSpec{
			Capacity: v1.ResourceList{v1.ResourceStorage: size}, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain, StorageClassName: class, VolumeMode: &block,
			ClaimRef: &v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: "blk"},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: csiDriverName,
				VolumeHandle: created.Volume.VolumeId}}}}
		if _, err := n.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := n.client.CoreV1().PersistentVolumeClaims("default").Create(ctx, &v1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "blk"}, Spec: v1.PersistentVolumeClaimSpec{AccessModes: pv.Spec.AccessModes,
				StorageClassName: &class, VolumeName: pv.Name, VolumeMode: &block,
				Resources: v1.VolumeResourceRequirements{Requests: pv.Spec.Capacity}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		devicePod := func(name, script string) *v1.Pod {
			p := busyboxPod(name, "sh", "-c", script)
			p.Spec.Volumes = []v1.Volume{{Name: "raw", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "blk"}}}}
			p.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "raw", DevicePath: "/dev/xvda"}}
			return p
		}
		n.createPod(devicePod("blk-writer", "test -b /dev/xvda || exit 1; printf blockdata > /dev/xvda && sync && exec sleep 3600"))
		w := n.waitPod("blk-writer", 60*time.Second, "the pod writing to the block device ready", ready)
		if rc := w.Status.ContainerStatuses[0].RestartCount; rc != 0 {
			t.Errorf("the writer restarted %d times (no block device, or the write failed)", rc)
		}
		n.deletePodAndWait(t, "blk-writer")
		n.createPod(devicePod("blk-reader", `test "$(head -c 9 /dev/xvda)" = blockdata || exit 1; exec sleep 3600`))
		r := n.waitPod("blk-reader", 60*time.Second, "the pod reading the block device ready", ready)
		if rc := r.Status.ContainerStatuses[0].RestartCount; rc != 0 {
			t.Errorf("the reader restarted %d times (it did not read what the writer wrote)", rc)
		}
		// The loop device backing the volume (its image file, named as the driver's container saw it).
		loopDevice := func() string {
			files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
			for _, f := range files {
				if b, err := os.ReadFile(f); err == nil && strings.HasSuffix(strings.TrimSpace(string(b)), "/"+created.Volume.VolumeId+".img") {
					return filepath.Base(filepath.Dir(filepath.Dir(f)))
				}
			}
			return ""
		}
		if loopDevice() == "" {
			t.Error("no loop device backs the volume while a pod uses it")
		}
		n.deletePodAndWait(t, "blk-reader")
		waitCSIMounts(t, n, 0, 0)
		eventually(t, 30*time.Second, "the volume's loop device detached", func() error {
			if d := loopDevice(); d != "" {
				return fmt.Errorf("%s still backs the volume", d)
			}
			return nil
		})
	})
}

// An online expansion of a volume in use: the test plays external-resizer's part (ControllerExpandVolume on
// the driver, the PersistentVolume's new capacity, the claim's resize status NodeResizePending); the kubelet
// finishes it on the node (NodeExpandVolume) at the pod's next sync and records the claim's new capacity,
// the pod running on.
func TestCSIExpansion(t *testing.T) {
	parallel(t)
	n := startNode(t, "--sync-frequency", "5s") // a running pod's volumes are looked at again each sync period
	ctx := context.Background()
	deployCSIDriver(t, n, csiDriverName, false)
	conn, err := grpc.NewClient("unix://"+filepath.Join(n.dir, "root", "plugins", csiDriverName, "csi.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	controller := csispec.NewControllerClient(conn)
	mountCap := &csispec.VolumeCapability{AccessType: &csispec.VolumeCapability_Mount{Mount: &csispec.VolumeCapability_MountVolume{}},
		AccessMode: &csispec.VolumeCapability_AccessMode{Mode: csispec.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	created, err := controller.CreateVolume(cctx, &csispec.CreateVolumeRequest{Name: "exp-1",
		CapacityRange: &csispec.CapacityRange{RequiredBytes: 16 << 20}, VolumeCapabilities: []*csispec.VolumeCapability{mountCap}})
	if err != nil {
		t.Fatal(err)
	}
	claim := n.createCSIClaim(t, "grow", created.Volume.VolumeId, csiDriverName)
	n.createPod(claimPod("grower", claim, "exec sleep 3600"))
	before := n.waitPod("grower", 60*time.Second, "the pod using the volume ready", ready)

	resp, err := controller.ControllerExpandVolume(cctx, &csispec.ControllerExpandVolumeRequest{VolumeId: created.Volume.VolumeId,
		CapacityRange: &csispec.CapacityRange{RequiredBytes: 2 << 30}, VolumeCapability: mountCap})
	if err != nil || !resp.NodeExpansionRequired {
		t.Fatalf("ControllerExpandVolume: %+v, %v", resp, err)
	}
	pv, err := n.client.CoreV1().PersistentVolumes().Get(ctx, claim+"-pv", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv.Spec.Capacity[v1.ResourceStorage] = resource.MustParse("2Gi")
	if _, err := n.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc, err := n.client.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pvc.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")}
	pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimNodeResizePending}
	if _, err := n.client.CoreV1().PersistentVolumeClaims("default").UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the claim's new capacity recorded by the node", func() error {
		pvc, err := n.client.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := pvc.Status.Capacity[v1.ResourceStorage]; c.Cmp(resource.MustParse("2Gi")) != 0 || len(pvc.Status.AllocatedResourceStatuses) != 0 {
			return fmt.Errorf("capacity %s, resize status %v", c.String(), pvc.Status.AllocatedResourceStatuses)
		}
		return nil
	})
	after := n.waitPod("grower", 10*time.Second, "the pod still ready", ready)
	if a, b := after.Status.ContainerStatuses[0], before.Status.ContainerStatuses[0]; a.ContainerID != b.ContainerID || a.RestartCount != 0 {
		t.Errorf("the container changed across the expansion: %s -> %s", b.ContainerID, a.ContainerID)
	}
}

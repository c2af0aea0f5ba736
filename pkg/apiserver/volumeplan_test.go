package apiserver

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

func testClass(name, provisioner string, mode storagev1.VolumeBindingMode) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
}

func testNode(name, zone string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}}}
}

// onNode pins a volume to the node of that hostname.
func onNode(host string) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{host}}}}}}}
	}
}

func inClass(class string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To(class) }
}

func podWithClaims(names ...string) *corev1.Pod {
	p := testPod("p")
	p.Namespace = "default"
	for _, n := range names {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: n,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: n}}})
	}
	return p
}

// Placement of a pod's claims, as upstream's VolumeBinding plugin: what stops the pod everywhere, what each
// node is refused for, and what placing it there writes first.
func TestVolumePlan(t *testing.T) {
	t.Parallel()
	local := func(name string, mod func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
		return testPV(name, "1Gi", corev1.VolumeAvailable, func(pv *corev1.PersistentVolume) {
			pv.Spec.StorageClassName = "local"
			if mod != nil {
				mod(pv)
			}
		})
	}
	classes := []*storagev1.StorageClass{
		testClass("local", noProvisioner, storagev1.VolumeBindingWaitForFirstConsumer),
		testClass("now", "csi.example.com", storagev1.VolumeBindingImmediate),
		testClass("late", "csi.example.com", storagev1.VolumeBindingWaitForFirstConsumer),
		func() *storagev1.StorageClass {
			sc := testClass("zoned", "csi.example.com", storagev1.VolumeBindingWaitForFirstConsumer)
			sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
				{Key: "topology.kubernetes.io/zone", Values: []string{"z2"}}}}}
			return sc
		}(),
	}
	nodes := []*corev1.Node{testNode("a", "z1"), testNode("b", "z2")}
	type want struct {
		msg       string
		reasons   map[string]string // node: reason ("" fits)
		static    map[string]string // node: "claim=volume"
		provision map[string]string // node: claim
	}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		claims  []*corev1.PersistentVolumeClaim
		volumes []*corev1.PersistentVolume
		want    want
	}{
		{"no claims", testPod("p"), nil, nil, want{}},
		{"a claim that does not exist", podWithClaims("data"), nil, nil, want{msg: `persistentvolumeclaim "data" not found`}},
		{"a claim being deleted", podWithClaims("data"), []*corev1.PersistentVolumeClaim{testPVC("data", "1Gi", func(c *corev1.PersistentVolumeClaim) {
			c.DeletionTimestamp = &metav1.Time{}
		})}, nil, want{msg: `persistentvolumeclaim "data" is being deleted`}},
		{"an unbound claim that binds at once", podWithClaims("data"), []*corev1.PersistentVolumeClaim{testPVC("data", "1Gi", inClass("now"))},
			nil, want{msg: messageUnboundImmediate}},
		{"a claim of a class that does not exist binds at once", podWithClaims("data"),
			[]*corev1.PersistentVolumeClaim{testPVC("data", "1Gi", inClass("nowhere"))}, nil, want{msg: messageUnboundImmediate}},
		{"a bound claim: its volume's node affinity decides", podWithClaims("data"),
			[]*corev1.PersistentVolumeClaim{testPVC("data", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "v" })},
			[]*corev1.PersistentVolume{local("v", onNode("b"))},
			want{reasons: map[string]string{"a": reasonNodeConflict, "b": ""}}},
		{"a bound claim whose volume is gone", podWithClaims("data"),
			[]*corev1.PersistentVolumeClaim{testPVC("data", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "v" })},
			nil, want{reasons: map[string]string{"a": reasonPVNotExist, "b": reasonPVNotExist}}},
		{"waiting for its first consumer: the local volume of each node", podWithClaims("data"),
			[]*corev1.PersistentVolumeClaim{testPVC("data", "1Gi", inClass("local"))},
			[]*corev1.PersistentVolume{local("va", onNode("a")), local("vb", onNode("b"))},
			want{reasons: map[string]string{"a": "", "b": ""}, static: map[string]string{"a": "data=va", "b": "data=vb"}}},
		{"two claims, one local volume left on a node", podWithClaims("one", "two"),
			[]*corev1.PersistentVolumeClaim{testPVC("one", "1Gi", inClass("local")), testPVC("two", "1Gi", inClass("local"))},
			[]*corev1.PersistentVolume{local("va", onNode("a")), local("vb1", onNode("b")), local("vb2", onNode("b"))},
			want{reasons: map[string]string{"a": reasonBindConflict, "b": ""}, static: map[string]string{"b": "one=vb1,two=vb2"}}},
		{"no volume and no provisioner", podWithClaims("data"), []*corev1.PersistentVolumeClaim{testPVC("data", "1Gi", inClass("local"))},
			[]*corev1.PersistentVolume{local("taken", func(pv *corev1.PersistentVolume) { claimRefTo("default", "other", "u")(pv) })},
			want{reasons: map[string]string{"a": reasonBindConflict, "b": reasonBindConflict}}},
		{"a provisioner: any node", podWithClaims("data"), []*corev1.PersistentVolumeClaim{testPVC("data", "1Gi", inClass("late"))}, nil,
			want{reasons: map[string]string{"a": "", "b": ""}, provision: map[string]string{"a": "data", "b": "data"}}},
		{"a provisioner limited to a zone", podWithClaims("data"), []*corev1.PersistentVolumeClaim{testPVC("data", "1Gi", inClass("zoned"))}, nil,
			want{reasons: map[string]string{"a": reasonBindConflict, "b": ""}, provision: map[string]string{"b": "data"}}},
		{"a node selected already", podWithClaims("data"), []*corev1.PersistentVolumeClaim{testPVC("data", "1Gi", func(c *corev1.PersistentVolumeClaim) {
			inClass("late")(c)
			c.Annotations = map[string]string{annSelectedNode: "a"}
		})}, nil, want{reasons: map[string]string{"a": "", "b": reasonBindConflict}, provision: map[string]string{"a": "data"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStorageState(tc.claims, tc.volumes, classes)
			plan, msg := st.planVolumes(tc.pod)
			if msg != tc.want.msg {
				t.Fatalf("message %q, want %q", msg, tc.want.msg)
			}
			if msg != "" || tc.want.reasons == nil {
				if plan != nil && msg == "" && len(podfacts.References(tc.pod).Claims) == 0 {
					t.Fatalf("a plan for a pod without claims")
				}
				return
			}
			for _, n := range nodes {
				if got := plan.filter(n); got != tc.want.reasons[n.Name] {
					t.Errorf("node %s: %q, want %q", n.Name, got, tc.want.reasons[n.Name])
				}
				if tc.want.reasons[n.Name] != "" {
					continue
				}
				var static, provision []string
				if b := plan.bindings(n.Name); b != nil {
					for _, s := range b.static {
						static = append(static, s.pvc.Name+"="+s.pv.Name)
					}
					for _, c := range b.provision {
						provision = append(provision, c.Name)
					}
				}
				if got := strings.Join(static, ","); got != tc.want.static[n.Name] {
					t.Errorf("node %s: pre-binds %q, want %q", n.Name, got, tc.want.static[n.Name])
				}
				if got := strings.Join(provision, ","); got != tc.want.provision[n.Name] {
					t.Errorf("node %s: provisions %q, want %q", n.Name, got, tc.want.provision[n.Name])
				}
			}
		})
	}
}

// A claim of a WaitForFirstConsumer class is bound when a pod using it is placed: to the local volume of the
// node the pod goes to, never before; a claim whose class names a provisioner gets the node selected.
func TestWaitForFirstConsumer(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	cs := ts.client
	for _, n := range []*corev1.Node{testNode("a", "z1"), testNode("b", "z2")} {
		node, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"),
			corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sc := range []*storagev1.StorageClass{testClass("local", noProvisioner, storagev1.VolumeBindingWaitForFirstConsumer),
		testClass("late", "csi.example.com", storagev1.VolumeBindingWaitForFirstConsumer)} {
		if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, host := range []string{"a", "b"} {
		pv := testPV("local-"+host, "1Gi", "", onNode(host))
		pv.Spec.StorageClassName, pv.Status = "local", corev1.PersistentVolumeStatus{}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pvcs := cs.CoreV1().PersistentVolumeClaims("default")
	for _, c := range []*corev1.PersistentVolumeClaim{testPVC("data", "1Gi", inClass("local")), testPVC("fresh", "1Gi", inClass("late"))} {
		c.UID, c.Status = "", corev1.PersistentVolumeClaimStatus{}
		if _, err := pvcs.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// No consumer: the claim stays Pending although a volume fits it.
	waitSettled(ctx, t, ts, "barrier-1")
	if c, err := pvcs.Get(ctx, "data", metav1.GetOptions{}); err != nil || c.Spec.VolumeName != "" || c.Status.Phase != corev1.ClaimPending {
		t.Fatalf("a claim without a consumer: %v %+v", err, c)
	}

	// A pod that asks for node b and the claim: bound there, to b's volume.
	pods := cs.CoreV1().Pods("default")
	p := podWithClaims("data")
	p.Name, p.Spec.SchedulerName = "user", ""
	p.Spec.NodeSelector = map[string]string{"topology.kubernetes.io/zone": "z2"}
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod bound to b", func() bool {
		got, _ := pods.Get(ctx, "user", metav1.GetOptions{})
		return got != nil && got.Spec.NodeName == "b"
	})
	c, err := pvcs.Get(ctx, "data", metav1.GetOptions{})
	if err != nil || c.Spec.VolumeName != "local-b" || c.Status.Phase != corev1.ClaimBound {
		t.Fatalf("the claim when its pod was bound: %v %+v", err, c)
	}
	if pv, _ := cs.CoreV1().PersistentVolumes().Get(ctx, "local-a", metav1.GetOptions{}); pv.Spec.ClaimRef != nil {
		t.Errorf("node a's volume taken: %+v", pv.Spec.ClaimRef)
	}

	// A claim whose class has a provisioner: the node is selected on the claim, and the pod waits for the
	// volume the provisioner makes.
	p = podWithClaims("fresh")
	p.Name, p.Spec.SchedulerName = "provisioned", ""
	p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "a"}
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node selected on the claim", func() bool {
		c, _ := pvcs.Get(ctx, "fresh", metav1.GetOptions{})
		return c != nil && c.Annotations[annSelectedNode] == "a"
	})
	waitSettled(ctx, t, ts, "barrier-2")
	if got, _ := pods.Get(ctx, "provisioned", metav1.GetOptions{}); got.Spec.NodeName != "" {
		t.Fatalf("the pod bound before its claim: %s", got.Spec.NodeName)
	}
	// The provisioner's part: a volume pre-bound to the claim.
	pv := testPV("made", "1Gi", "", claimRefTo("default", "fresh", ""))
	pv.Spec.StorageClassName, pv.Status = "late", corev1.PersistentVolumeStatus{}
	onNode("a")(pv)
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod bound once its claim is", func() bool {
		got, _ := pods.Get(ctx, "provisioned", metav1.GetOptions{})
		return got != nil && got.Spec.NodeName == "a"
	})

	// A pod whose claim does not exist says so.
	p = podWithClaims("missing")
	p.Name, p.Spec.SchedulerName = "orphan", ""
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the missing claim in the pod's condition", func() bool {
		got, _ := pods.Get(ctx, "orphan", metav1.GetOptions{})
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Message == `0/2 nodes are available: persistentvolumeclaim "missing" not found.` {
				return true
			}
		}
		return false
	})
}

// waitSettled waits for the control loops to act on everything written so far: a claim and volume written
// after it, of no class, bound by the same loop.
func waitSettled(ctx context.Context, t *testing.T, ts *testServer, name string) {
	t.Helper()
	pv := testPV(name, "1Gi", "", nil)
	pv.Status = corev1.PersistentVolumeStatus{}
	if _, err := ts.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := testPVC(name, "1Gi", inClass(""))
	c.UID, c.Status = "", corev1.PersistentVolumeClaimStatus{}
	pvcs := ts.client.CoreV1().PersistentVolumeClaims("default")
	if _, err := pvcs.Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the control loop's pass", func() bool {
		got, err := pvcs.Get(ctx, name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.ClaimBound
	})
}

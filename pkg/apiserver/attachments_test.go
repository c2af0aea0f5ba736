package apiserver

import (
	"crypto/sha256"
	"fmt"
	"github.com/nodeagent/kubelet/pkg/csi/csinames"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The name is upstream's getAttachmentName: fmt.Sprintf("csi-%x", sha256 of handle+driver+node).
func TestAttachmentName(t *testing.T) {
	t.Parallel()
	want := fmt.Sprintf("csi-%x", sha256.Sum256([]byte(fmt.Sprintf("%s%s%s", "vol-1", "hostpath.csi.k8s.io", "n1"))))
	if got := csinames.AttachmentName("vol-1", "hostpath.csi.k8s.io", "n1"); got != want || len(got) != 68 {
		t.Errorf("got %s, want %s", got, want)
	}
}

// attachFixture is a small world: nodes n1, n2, n3 (n3 lists csi volumes in use); drivers
// attach.csi (attachRequired), noattach.csi (not); volumes and the claims bound to them.
type attachFixture struct{ w *attachWorld }

func newAttachFixture() *attachFixture {
	w := &attachWorld{claims: map[string]*corev1.PersistentVolumeClaim{}, volumes: map[string]*corev1.PersistentVolume{},
		drivers: map[string]*storagev1.CSIDriver{}, nodes: map[string]*corev1.Node{}, attachments: map[string]*storagev1.VolumeAttachment{}}
	for _, n := range []string{"n1", "n2", "n3"} {
		w.nodes[n] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}
	}
	w.nodes["n3"].Status.VolumesInUse = []corev1.UniqueVolumeName{"kubernetes.io/csi/attach.csi^h-rwo", "kubernetes.io/host-path/x"}
	w.drivers["attach.csi"] = &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "attach.csi"},
		Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(true)}}
	w.drivers["noattach.csi"] = &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "noattach.csi"},
		Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}
	f := &attachFixture{w: w}
	f.bound("pv-rwo", "data", "attach.csi", "h-rwo", corev1.ReadWriteOnce)
	f.bound("pv-rwx", "shared", "attach.csi", "h-rwx", corev1.ReadWriteMany)
	f.bound("pv-noattach", "plain", "noattach.csi", "h-noattach", corev1.ReadWriteOnce)
	f.bound("pv-nodriver", "nodriver", "unknown.csi", "h-nodriver", corev1.ReadWriteOnce)
	f.bound("pv-eph", "web-scratch", "attach.csi", "h-eph", corev1.ReadWriteOnce)
	w.claims["default/web-scratch"].OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: "web", UID: "web-uid", Controller: ptr.To(true)}}
	hp := testPV("pv-hostpath", "1Gi", corev1.VolumeBound, claimRefTo("default", "hostpath", "hostpath-uid"))
	w.volumes[hp.Name] = hp
	w.claims["default/hostpath"] = testPVC("hostpath", "1Gi", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.VolumeName, c.Status.Phase = hp.Name, corev1.ClaimBound
	})
	return f
}

// bound adds a csi volume and the claim bound to it.
func (f *attachFixture) bound(pv, claim, driver, handle string, mode corev1.PersistentVolumeAccessMode) {
	v := testPV(pv, "1Gi", corev1.VolumeBound, claimRefTo("default", claim, claim+"-uid"))
	v.Spec.HostPath, v.Spec.CSI = nil, &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}
	v.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{mode}
	f.w.volumes[pv] = v
	f.w.claims["default/"+claim] = testPVC(claim, "1Gi", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.VolumeName, c.Status.Phase = pv, corev1.ClaimBound
	})
}

// attachPod returns a pod on node using the claims (a name "eph:x" is a generic ephemeral volume x),
// created at minute age.
func attachPod(name, node string, age int, claims ...string) *corev1.Pod {
	p := testPod(name)
	p.Namespace, p.UID, p.Spec.NodeName = "default", types.UID(name+"-uid"), node
	p.CreationTimestamp = metav1.Unix(int64(age)*60, 0)
	p.Status.Phase = corev1.PodRunning
	for i, c := range claims {
		if eph, ok := strings.CutPrefix(c, "eph:"); ok {
			p.Spec.Volumes = append(p.Spec.Volumes, ephemeralVolume(eph, "1Gi"))
			continue
		}
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", i), VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return p
}

// vaFor returns the attachment of handle (driver attach.csi) on node, of volume pv.
func vaFor(handle, node, pv string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: csinames.AttachmentName(handle, "attach.csi", node)},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "attach.csi", NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pv)}}}
}

// The attachments are those upstream's attach/detach controller makes with the csi attacher: one per csi
// PersistentVolume of a driver requiring attach, used by a pod bound to a node and not terminated.
func TestDesiredAttachments(t *testing.T) {
	t.Parallel()
	withPhase := func(p *corev1.Pod, phase corev1.PodPhase) *corev1.Pod { p.Status.Phase = phase; return p }
	deleting := func(p *corev1.Pod, running bool) *corev1.Pod {
		p.DeletionTimestamp = &metav1.Time{}
		state := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}
		if running {
			state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: state}}
		return p
	}
	inline := attachPod("inline", "n1", 0)
	inline.Spec.Volumes = []corev1.Volume{{Name: "i", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "attach.csi"}}}}
	for _, tc := range []struct {
		name     string
		pods     []*corev1.Pod
		existing []*storagev1.VolumeAttachment
		mod      func(*attachWorld)
		want     []string // handle@node
	}{
		{"a claim of an attach-required driver", []*corev1.Pod{attachPod("db", "n1", 0, "data")}, nil, nil, []string{"h-rwo@n1"}},
		{"attachRequired false", []*corev1.Pod{attachPod("db", "n1", 0, "plain")}, nil, nil, nil},
		{"no CSIDriver: attach required", []*corev1.Pod{attachPod("db", "n1", 0, "nodriver")}, nil, nil, []string{"h-nodriver@n1"}},
		{"not a csi volume", []*corev1.Pod{attachPod("db", "n1", 0, "hostpath")}, nil, nil, nil},
		{"an inline csi volume", []*corev1.Pod{inline}, nil, nil, nil},
		{"not bound to a node", []*corev1.Pod{attachPod("db", "", 0, "data")}, nil, nil, nil},
		{"a node that does not exist", []*corev1.Pod{attachPod("db", "n9", 0, "data")}, nil, nil, nil},
		{"Succeeded", []*corev1.Pod{withPhase(attachPod("db", "n1", 0, "data"), corev1.PodSucceeded)}, nil, nil, nil},
		{"Failed", []*corev1.Pod{withPhase(attachPod("db", "n1", 0, "data"), corev1.PodFailed)}, nil, nil, nil},
		{"being deleted, still running", []*corev1.Pod{deleting(attachPod("db", "n1", 0, "data"), true)}, nil, nil, []string{"h-rwo@n1"}},
		{"being deleted, stopped", []*corev1.Pod{deleting(attachPod("db", "n1", 0, "data"), false)}, nil, nil, nil},
		{"a missing claim", []*corev1.Pod{attachPod("db", "n1", 0, "nope")}, nil, nil, nil},
		{"a Pending claim", []*corev1.Pod{attachPod("db", "n1", 0, "data")}, nil, func(w *attachWorld) {
			w.claims["default/data"].Status.Phase = corev1.ClaimPending
		}, nil},
		{"a volume bound to an earlier claim of that name", []*corev1.Pod{attachPod("db", "n1", 0, "data")}, nil, func(w *attachWorld) {
			w.volumes["pv-rwo"].Spec.ClaimRef.UID = "old"
		}, nil},
		{"the volume gone", []*corev1.Pod{attachPod("db", "n1", 0, "data")}, nil, func(w *attachWorld) { delete(w.volumes, "pv-rwo") }, nil},
		{"an ephemeral volume's claim", []*corev1.Pod{attachPod("web", "n1", 0, "eph:scratch")}, nil, nil, []string{"h-eph@n1"}},
		{"an ephemeral volume's claim not the pod's", []*corev1.Pod{attachPod("web", "n1", 0, "eph:scratch")}, nil, func(w *attachWorld) {
			w.claims["default/web-scratch"].OwnerReferences = nil
		}, nil},
		{"two pods on a node share one", []*corev1.Pod{attachPod("a", "n1", 0, "data"), attachPod("b", "n1", 1, "data", "shared")}, nil, nil,
			[]string{"h-rwo@n1", "h-rwx@n1"}},
		{"ReadWriteMany on two nodes", []*corev1.Pod{attachPod("a", "n1", 0, "shared"), attachPod("b", "n2", 1, "shared")}, nil, nil,
			[]string{"h-rwx@n1", "h-rwx@n2"}},
		{"ReadWriteOnce on two nodes: the oldest pod's", []*corev1.Pod{attachPod("a", "n1", 5, "data"), attachPod("b", "n2", 1, "data")}, nil, nil,
			[]string{"h-rwo@n2"}},
		{"ReadWriteOnce attached elsewhere: wait for its detach", []*corev1.Pod{attachPod("b", "n2", 0, "data")},
			[]*storagev1.VolumeAttachment{vaFor("h-rwo", "n1", "pv-rwo")}, nil, nil},
		{"ReadWriteOnce attached here stays", []*corev1.Pod{attachPod("a", "n1", 5, "data"), attachPod("b", "n2", 1, "data")},
			[]*storagev1.VolumeAttachment{vaFor("h-rwo", "n1", "pv-rwo")}, nil, []string{"h-rwo@n1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newAttachFixture()
			f.w.pods = tc.pods
			for _, va := range tc.existing {
				f.w.attachments[va.Name] = va
			}
			if tc.mod != nil {
				tc.mod(f.w)
			}
			got := desiredAttachments(f.w)
			var desc []string
			for name, a := range got {
				if name != csinames.AttachmentName(a.handle, a.driver, a.node) {
					t.Errorf("attachment %+v named %s", a, name)
				}
				desc = append(desc, a.handle+"@"+a.node)
			}
			sort.Strings(desc)
			if strings.Join(desc, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v, want %v", desc, tc.want)
			}
		})
	}
}

// An attachment no pod needs is deleted when it is the controller's own (of a csi PersistentVolume that is
// there, named by the csi attacher, or known to the controller), not already being deleted, and its node
// no longer lists the volume in use.
func TestAttachmentsToDelete(t *testing.T) {
	t.Parallel()
	inlineSpec := vaFor("h-x", "n1", "")
	inlineSpec.Name, inlineSpec.Spec.Source = "inline", storagev1.VolumeAttachmentSource{InlineVolumeSpec: &corev1.PersistentVolumeSpec{}}
	deleting := vaFor("h-rwx", "n2", "pv-rwx")
	deleting.DeletionTimestamp = &metav1.Time{}
	foreign := vaFor("h-rwx", "n2", "pv-rwx")
	foreign.Name = "made-by-hand"
	for _, tc := range []struct {
		name  string
		va    *storagev1.VolumeAttachment
		known bool
		want  bool
	}{
		{"wanted", vaFor("h-rwo", "n1", "pv-rwo"), false, false},
		{"unused", vaFor("h-rwx", "n1", "pv-rwx"), false, true},
		{"unused, but its node still has it mounted", vaFor("h-rwo", "n3", "pv-rwo"), false, false},
		{"unused, its node has another one mounted", vaFor("h-rwx", "n3", "pv-rwx"), false, true},
		{"its node is gone", vaFor("h-rwo", "n9", "pv-rwo"), false, true},
		{"already being deleted", deleting, false, false},
		{"an inline spec's", inlineSpec, false, false},
		{"not named by the csi attacher", foreign, false, false},
		{"of another driver than its volume's", vaFor("h-plain", "n2", "pv-noattach"), false, false},
		{"its volume is not there", vaFor("h-gone", "n2", "pv-gone"), false, false},
		{"its volume gone, known to be the controller's", vaFor("h-gone", "n2", "pv-gone"), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newAttachFixture()
			f.w.pods = []*corev1.Pod{attachPod("db", "n1", 0, "data")}
			f.w.attachments[tc.va.Name] = tc.va
			f.w.known = map[string]bool{tc.va.Name: tc.known}
			got := attachmentsToDelete(f.w, desiredAttachments(f.w))
			if deleted := len(got) == 1 && got[0] == tc.va.Name; deleted != tc.want || len(got) > 1 {
				t.Errorf("deleted %v, want %s deleted: %v", got, tc.va.Name, tc.want)
			}
		})
	}
}

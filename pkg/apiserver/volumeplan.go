package apiserver

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// The words of upstream's VolumeBinding scheduler plugin, and the claim
// annotation that asks a provisioner for a volume on the chosen node.
const (
	annSelectedNode         = "volume.kubernetes.io/selected-node"
	noProvisioner           = "kubernetes.io/no-provisioner"
	reasonBindConflict      = "node(s) didn't find available persistent volumes to bind"
	reasonNodeConflict      = "node(s) had volume node affinity conflict"
	reasonPVNotExist        = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
	messageUnboundImmediate = "pod has unbound immediate PersistentVolumeClaims"
)

// storageState is what volume placement reads of the store in one pass:
// claims by namespace/name, volumes (also by name) and storage classes by
// name. chosen holds the volumes pre-bound during the pass, so that two pods
// placed in one pass never take the same one.
type storageState struct {
	claimList []*corev1.PersistentVolumeClaim
	claims    map[string]*corev1.PersistentVolumeClaim
	volumes   []*corev1.PersistentVolume
	byName    map[string]*corev1.PersistentVolume
	classes   map[string]*storagev1.StorageClass
	chosen    map[string]bool
}

func newStorageState(claims []*corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume, classes []*storagev1.StorageClass) *storageState {
	st := &storageState{claimList: claims, claims: map[string]*corev1.PersistentVolumeClaim{}, volumes: volumes,
		byName: map[string]*corev1.PersistentVolume{}, classes: map[string]*storagev1.StorageClass{}, chosen: map[string]bool{}}
	for _, c := range claims {
		st.claims[c.Namespace+"/"+c.Name] = c
	}
	for _, v := range volumes {
		st.byName[v.Name] = v
	}
	for _, sc := range classes {
		st.classes[sc.Name] = sc
	}
	return st
}

// delayBinding reports whether a claim's class binds it only once a pod
// using it is placed (WaitForFirstConsumer). A class that does not exist
// binds at once, as upstream's IsDelayBindingMode.
func (st *storageState) delayBinding(c *corev1.PersistentVolumeClaim) bool {
	sc := st.classes[claimClass(c)]
	return sc != nil && sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// canProvision reports whether a provisioner may make a volume for c on
// node: its class names a provisioner and allows the node's topology.
func (st *storageState) canProvision(c *corev1.PersistentVolumeClaim, node *corev1.Node) bool {
	sc := st.classes[claimClass(c)]
	if sc == nil || sc.Provisioner == "" || sc.Provisioner == noProvisioner {
		return false
	}
	return matchTopology(sc.AllowedTopologies, node.Labels)
}

// matchTopology reports whether labels satisfy one of the terms (all of its
// expressions); no terms allow every node.
func matchTopology(terms []corev1.TopologySelectorTerm, labels map[string]string) bool {
	if len(terms) == 0 {
		return true
	}
	for _, term := range terms {
		ok := true
		for _, e := range term.MatchLabelExpressions {
			v, has := labels[e.Key]
			found := false
			for _, want := range e.Values {
				found = found || has && v == want
			}
			ok = ok && found
		}
		if ok {
			return true
		}
	}
	return false
}

// volumeFitsNode reports whether a volume's node affinity admits node. An
// affinity that does not parse admits none.
func volumeFitsNode(v *corev1.PersistentVolume, node *corev1.Node) bool {
	if v.Spec.NodeAffinity == nil || v.Spec.NodeAffinity.Required == nil {
		return true
	}
	sel, err := nodeaffinity.NewNodeSelector(v.Spec.NodeAffinity.Required)
	return err == nil && sel.Match(node)
}

// volumePlan is the placement of one pod's claims, as upstream's
// VolumeBinding plugin makes it: the volumes of its bound claims (nil for
// one that does not exist), its unbound claims waiting for their first
// consumer, and, per node that fits, what binding them there takes.
type volumePlan struct {
	st      *storageState
	bound   []*corev1.PersistentVolume
	unbound []*corev1.PersistentVolumeClaim
	byNode  map[string]*volumeBindings
}

// volumeBindings is what placing a pod on a node writes before the pod is
// bound (upstream's PreBind): volumes pre-bound to claims, and claims handed
// to their provisioner with the node selected.
type volumeBindings struct {
	static    []staticBinding
	provision []*corev1.PersistentVolumeClaim
}

type staticBinding struct {
	pv  *corev1.PersistentVolume
	pvc *corev1.PersistentVolumeClaim
}

// planVolumes prepares the placement of pod's claims (upstream's
// PreFilter). msg, when not empty, is why the pod can go nowhere now: a
// claim that does not exist, is being deleted or is not the pod's own
// ephemeral claim, or an unbound claim that binds at once (the PV controller
// binds it, or nothing does). A pod without claims gets a nil plan.
func (st *storageState) planVolumes(pod *corev1.Pod) (plan *volumePlan, msg string) {
	names := podfacts.References(pod).Claims
	if len(names) == 0 {
		return nil, ""
	}
	plan = &volumePlan{st: st, byNode: map[string]*volumeBindings{}}
	immediate := false
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.Ephemeral == nil {
			continue
		}
		if pvc := st.claims[pod.Namespace+"/"+ephemeralClaimName(pod, v)]; pvc != nil {
			if err := claimIsForPod(pod, pvc); err != nil {
				return nil, err.Error()
			}
		}
	}
	for _, name := range names {
		pvc := st.claims[pod.Namespace+"/"+name]
		switch {
		case pvc == nil:
			return nil, fmt.Sprintf("persistentvolumeclaim %q not found", name)
		case pvc.DeletionTimestamp != nil:
			return nil, fmt.Sprintf("persistentvolumeclaim %q is being deleted", name)
		case pvc.Spec.VolumeName != "":
			plan.bound = append(plan.bound, st.byName[pvc.Spec.VolumeName])
		case st.delayBinding(pvc):
			plan.unbound = append(plan.unbound, pvc)
		default:
			immediate = true
		}
	}
	if immediate {
		return nil, messageUnboundImmediate
	}
	return plan, ""
}

// filter returns "" when the pod's claims can be used on node, remembering
// the bindings that takes, else the reason they cannot (upstream's Filter):
// every bound volume's node affinity admits the node; each claim waiting for
// its first consumer gets an available volume the node can use, or a
// provisioner that can make one there (a claim whose selected node is
// another one gets neither).
func (p *volumePlan) filter(node *corev1.Node) string {
	for _, v := range p.bound {
		if v == nil {
			return reasonPVNotExist
		}
		if !volumeFitsNode(v, node) {
			return reasonNodeConflict
		}
	}
	if len(p.unbound) == 0 {
		return ""
	}
	b := &volumeBindings{}
	skip := map[string]bool{}
	for name := range p.st.chosen {
		skip[name] = true
	}
	for _, pvc := range p.unbound {
		if sel, ok := pvc.Annotations[annSelectedNode]; ok {
			if sel != node.Name || !p.st.canProvision(pvc, node) {
				return reasonBindConflict
			}
			b.provision = append(b.provision, pvc)
			continue
		}
		if v := matchVolume(pvc, p.st.volumes, volumeChoice{node: node, skip: skip}); v != nil {
			skip[v.Name] = true
			b.static = append(b.static, staticBinding{pv: v, pvc: pvc})
			continue
		}
		if !p.st.canProvision(pvc, node) {
			return reasonBindConflict
		}
		b.provision = append(b.provision, pvc)
	}
	p.byNode[node.Name] = b
	return ""
}

// bindings returns what placing the pod on node writes first, or nil when
// all of its claims are bound already.
func (p *volumePlan) bindings(node string) *volumeBindings {
	if p == nil || len(p.unbound) == 0 {
		return nil
	}
	return p.byNode[node]
}

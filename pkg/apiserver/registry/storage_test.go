package registry

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// checkErrs fails unless errs is empty when want is, and else mentions want.
func checkErrs(t *testing.T, errs field.ErrorList, want string) {
	t.Helper()
	switch {
	case want == "" && len(errs) > 0:
		t.Errorf("want valid, got %s", errText(errs))
	case want != "" && len(errs) == 0:
		t.Errorf("want an error with %q, got none", want)
	case want != "" && !strings.Contains(errText(errs), want):
		t.Errorf("want an error with %q, got %s", want, errText(errs))
	}
}

// validateCreate prepares and validates obj as a create does.
func validateCreate(s Strategy, obj runtime.Object) field.ErrorList {
	s.PrepareForCreate(obj)
	return s.Validate(obj)
}

// validateUpdate prepares and validates cur as an update of old does.
func validateUpdate(s Strategy, cur, old runtime.Object) field.ErrorList {
	s.PrepareForUpdate(cur, old)
	return s.ValidateUpdate(cur, old)
}

func objMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, ResourceVersion: "1"}
}

// A new CSIDriver gets kube-apiserver's defaults; its spec is validated as upstream's.
func TestCSIDriverStrategy(t *testing.T) {
	d := &storagev1.CSIDriver{ObjectMeta: objMeta("csi.example.com")}
	checkErrs(t, validateCreate(csiDriverStrategy{}, d), "")
	s := d.Spec
	if !*s.AttachRequired || *s.PodInfoOnMount || *s.StorageCapacity || *s.RequiresRepublish || *s.SELinuxMount ||
		*s.FSGroupPolicy != storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy ||
		len(s.VolumeLifecycleModes) != 1 || s.VolumeLifecycleModes[0] != storagev1.VolumeLifecyclePersistent {
		t.Errorf("defaults: %+v", s)
	}
	for _, tc := range []struct {
		name    string
		mod     func(*storagev1.CSIDriver)
		wantErr string
	}{
		{"valid", func(*storagev1.CSIDriver) {}, ""},
		{"name not a DNS subdomain", func(d *storagev1.CSIDriver) { d.Name = "CSI_driver" }, "metadata.name: Invalid value"},
		{"unknown fsGroupPolicy", func(d *storagev1.CSIDriver) { d.Spec.FSGroupPolicy = ptr.To(storagev1.FSGroupPolicy("Any")) },
			`spec.fsGroupPolicy: Unsupported value: "Any": supported values: "File", "None", "ReadWriteOnceWithFSType"`},
		{"unknown lifecycle mode", func(d *storagev1.CSIDriver) {
			d.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{"Forever"}
		}, `spec.volumeLifecycleModes: Unsupported value: "Forever"`},
		{"duplicate audience", func(d *storagev1.CSIDriver) {
			d.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "a"}, {Audience: "a"}}
		}, `spec.tokenRequests[1].audience: Duplicate value: "a"`},
		{"short token", func(d *storagev1.CSIDriver) {
			d.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "a", ExpirationSeconds: ptr.To[int64](60)}}
		}, "may not specify a duration less than 10 minutes"},
		{"token secrets without token requests", func(d *storagev1.CSIDriver) { d.Spec.ServiceAccountTokenInSecrets = ptr.To(true) },
			"serviceAccountTokenInSecrets is set but no tokenRequests are specified"},
		{"allocatable updated too often", func(d *storagev1.CSIDriver) { d.Spec.NodeAllocatableUpdatePeriodSeconds = ptr.To[int64](5) },
			"must be greater than or equal to 10 seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &storagev1.CSIDriver{ObjectMeta: objMeta("csi.example.com")}
			tc.mod(d)
			checkErrs(t, validateCreate(csiDriverStrategy{}, d), tc.wantErr)
		})
	}
}

// attachRequired and volumeLifecycleModes are fixed; the other flags change, bumping the generation.
func TestCSIDriverUpdate(t *testing.T) {
	old := &storagev1.CSIDriver{ObjectMeta: objMeta("csi.example.com")}
	DefaultCSIDriver(old)
	for _, tc := range []struct {
		name    string
		mod     func(*storagev1.CSIDriverSpec)
		wantErr string
		wantGen int64
	}{
		{"unchanged", func(*storagev1.CSIDriverSpec) {}, "", 0},
		{"defaults left out", func(s *storagev1.CSIDriverSpec) { *s = storagev1.CSIDriverSpec{} }, "", 0},
		{"podInfoOnMount", func(s *storagev1.CSIDriverSpec) { s.PodInfoOnMount = ptr.To(true) }, "", 1},
		{"storageCapacity", func(s *storagev1.CSIDriverSpec) { s.StorageCapacity = ptr.To(true) }, "", 1},
		{"attachRequired", func(s *storagev1.CSIDriverSpec) { s.AttachRequired = ptr.To(false) },
			"spec.attachedRequired: Invalid value: false: field is immutable", 1},
		{"volumeLifecycleModes", func(s *storagev1.CSIDriverSpec) {
			s.VolumeLifecycleModes = append(s.VolumeLifecycleModes, storagev1.VolumeLifecycleEphemeral)
		}, "spec.volumeLifecycleModes: Invalid value", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := old.DeepCopy()
			tc.mod(&cur.Spec)
			checkErrs(t, validateUpdate(csiDriverStrategy{}, cur, old), tc.wantErr)
			if cur.Generation != tc.wantGen {
				t.Errorf("generation %d, want %d", cur.Generation, tc.wantGen)
			}
		})
	}
}

func csiNode(drivers ...storagev1.CSINodeDriver) *storagev1.CSINode {
	return &storagev1.CSINode{ObjectMeta: objMeta("n1"), Spec: storagev1.CSINodeSpec{Drivers: drivers}}
}

func TestCSINodeStrategy(t *testing.T) {
	driver := func(name, id string) storagev1.CSINodeDriver { return storagev1.CSINodeDriver{Name: name, NodeID: id} }
	withCount := func(d storagev1.CSINodeDriver, n int32) storagev1.CSINodeDriver {
		d.Allocatable = &storagev1.VolumeNodeResources{Count: ptr.To(n)}
		return d
	}
	withKeys := func(d storagev1.CSINodeDriver, keys ...string) storagev1.CSINodeDriver {
		d.TopologyKeys = keys
		return d
	}
	for _, tc := range []struct {
		name    string
		node    *storagev1.CSINode
		wantErr string
	}{
		{"no drivers", csiNode(), ""},
		{"two drivers", csiNode(withKeys(driver("a.example.com", "n1"), "topology.example.com/zone"),
			withCount(driver("B.example.com", strings.Repeat("x", 256)), 0)), ""},
		{"bad node name", &storagev1.CSINode{ObjectMeta: objMeta("Node_1")}, "metadata.name: Invalid value"},
		{"driver name not a DNS subdomain", csiNode(driver("a_b", "n1")), `spec.drivers[0].name: Invalid value: "a_b"`},
		{"driver name too long", csiNode(driver(strings.Repeat("a", 64), "n1")),
			"spec.drivers[0].name: Too long: may not be more than 63 bytes"},
		{"no driver name", csiNode(driver("", "n1")), "spec.drivers[0].name: Required value"},
		{"no nodeID", csiNode(driver("a.example.com", "")), "spec.drivers[0].nodeID: Required value"},
		{"nodeID too long", csiNode(driver("a.example.com", strings.Repeat("x", 257))), "must be 256 characters or less"},
		{"same driver twice", csiNode(driver("a.example.com", "n1"), driver("a.example.com", "n1")),
			`spec.drivers[1].name: Duplicate value: "a.example.com"`},
		{"negative count", csiNode(withCount(driver("a.example.com", "n1"), -1)),
			"spec.drivers[0].allocatable.count: Invalid value: -1: must be greater than or equal to 0"},
		{"duplicate topology key", csiNode(withKeys(driver("a.example.com", "n1"), "zone", "zone")),
			`spec.drivers[0]: Duplicate value: "zone"`},
		{"bad topology key", csiNode(withKeys(driver("a.example.com", "n1"), "a/b/c")), `spec.drivers[0]: Invalid value: "a/b/c"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrs(t, validateCreate(csiNodeStrategy{}, tc.node), tc.wantErr)
		})
	}

	// A registered driver's entry is fixed but for its allocatable count.
	old := csiNode(withCount(driver("a.example.com", "n1"), 5))
	for _, tc := range []struct {
		name    string
		cur     *storagev1.CSINode
		wantErr string
	}{
		{"count changed", csiNode(withCount(driver("a.example.com", "n1"), 7)), ""},
		{"driver added", csiNode(withCount(driver("a.example.com", "n1"), 5), driver("b.example.com", "n1")), ""},
		{"driver removed", csiNode(), ""},
		{"nodeID changed", csiNode(withCount(driver("a.example.com", "n2"), 5)), "spec.drivers: Invalid value"},
		{"topology keys changed", csiNode(withKeys(withCount(driver("a.example.com", "n1"), 5), "zone")), "field is immutable"},
	} {
		t.Run("update: "+tc.name, func(t *testing.T) {
			checkErrs(t, validateUpdate(csiNodeStrategy{}, tc.cur, old), tc.wantErr)
		})
	}
}

func storageClass(mod func(*storagev1.StorageClass)) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: objMeta("fast"), Provisioner: "csi.example.com",
		Parameters: map[string]string{"type": "ssd"}}
	if mod != nil {
		mod(sc)
	}
	return sc
}

func TestStorageClassStrategy(t *testing.T) {
	sc := storageClass(nil)
	checkErrs(t, validateCreate(storageClassStrategy{}, sc), "")
	if *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete || *sc.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		t.Errorf("defaults: %+v", sc)
	}
	many := map[string]string{}
	for i := 0; i <= maxParameters; i++ {
		many[strings.Repeat("k", i+1)] = "v"
	}
	zone := func(values ...string) corev1.TopologySelectorTerm {
		return corev1.TopologySelectorTerm{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: "topology.kubernetes.io/zone", Values: values}}}
	}
	for _, tc := range []struct {
		name    string
		mod     func(*storagev1.StorageClass)
		wantErr string
	}{
		{"no provisioner", func(sc *storagev1.StorageClass) { sc.Provisioner = "" }, "provisioner: Required value"},
		{"provisioner not a qualified name", func(sc *storagev1.StorageClass) { sc.Provisioner = "a/b/c" }, `provisioner: Invalid value: "a/b/c"`},
		{"upper-case provisioner", func(sc *storagev1.StorageClass) { sc.Provisioner = "CSI.Example.com" }, ""},
		{"bad name", func(sc *storagev1.StorageClass) { sc.Name = "Fast!" }, "metadata.name: Invalid value"},
		{"too many parameters", func(sc *storagev1.StorageClass) { sc.Parameters = many }, "parameters: Too long: may not be more than 512 bytes"},
		{"empty parameter key", func(sc *storagev1.StorageClass) { sc.Parameters = map[string]string{"": "x"} },
			`parameters: Invalid value: "": field can not be empty.`},
		{"parameters too large", func(sc *storagev1.StorageClass) {
			sc.Parameters = map[string]string{"big": strings.Repeat("x", maxParametersSize)}
		}, "parameters: Too long"},
		{"Recycle", func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRecycle) },
			`reclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", "Retain"`},
		{"WaitForFirstConsumer", func(sc *storagev1.StorageClass) {
			sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
		}, ""},
		{"unknown binding mode", func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingMode("Later")) },
			`volumeBindingMode: Unsupported value: "Later"`},
		{"topologies", func(sc *storagev1.StorageClass) {
			sc.AllowedTopologies = []corev1.TopologySelectorTerm{zone("a"), zone("b")}
		}, ""},
		{"same topology twice", func(sc *storagev1.StorageClass) {
			sc.AllowedTopologies = []corev1.TopologySelectorTerm{zone("a"), zone("a")}
		}, "allowedTopologies[1].matchLabelExpressions: Duplicate value"},
		{"topology without values", func(sc *storagev1.StorageClass) { sc.AllowedTopologies = []corev1.TopologySelectorTerm{zone()} },
			"allowedTopologies[0].matchLabelExpressions[0].values: Required value"},
		{"topology value twice", func(sc *storagev1.StorageClass) { sc.AllowedTopologies = []corev1.TopologySelectorTerm{zone("a", "a")} },
			`allowedTopologies[0].matchLabelExpressions[0].values[1]: Duplicate value: "a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrs(t, validateCreate(storageClassStrategy{}, storageClass(tc.mod)), tc.wantErr)
		})
	}

	old := storageClass(nil)
	DefaultStorageClass(old)
	for _, tc := range []struct {
		name    string
		mod     func(*storagev1.StorageClass)
		wantErr string
	}{
		{"labels and expansion", func(sc *storagev1.StorageClass) {
			sc.Labels, sc.AllowVolumeExpansion = map[string]string{"a": "b"}, ptr.To(true)
		}, ""},
		{"defaults left out", func(sc *storagev1.StorageClass) { sc.ReclaimPolicy, sc.VolumeBindingMode = nil, nil }, ""},
		{"provisioner", func(sc *storagev1.StorageClass) { sc.Provisioner = "other.example.com" }, "provisioner: Forbidden: updates to provisioner are forbidden."},
		{"parameters", func(sc *storagev1.StorageClass) { sc.Parameters = nil }, "parameters: Forbidden: updates to parameters are forbidden."},
		{"reclaim policy", func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain) },
			"reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden."},
		{"binding mode", func(sc *storagev1.StorageClass) {
			sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
		}, `volumeBindingMode: Invalid value: "WaitForFirstConsumer": field is immutable`},
	} {
		t.Run("update: "+tc.name, func(t *testing.T) {
			cur := old.DeepCopy()
			tc.mod(cur)
			checkErrs(t, validateUpdate(storageClassStrategy{}, cur, old), tc.wantErr)
		})
	}
}

func attachment(mod func(*storagev1.VolumeAttachment)) *storagev1.VolumeAttachment {
	va := &storagev1.VolumeAttachment{ObjectMeta: objMeta("csi-123"), Spec: storagev1.VolumeAttachmentSpec{
		Attacher: "csi.example.com", NodeName: "n1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv1")}}}
	if mod != nil {
		mod(va)
	}
	return va
}

func TestVolumeAttachmentStrategy(t *testing.T) {
	va := attachment(func(va *storagev1.VolumeAttachment) { va.Status.Attached = true })
	checkErrs(t, validateCreate(volumeAttachmentStrategy{}, va), "")
	if va.Status.Attached {
		t.Errorf("status kept on create: %+v", va.Status)
	}
	inline := &corev1.PersistentVolumeSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "csi.example.com", VolumeHandle: "h"}}}
	for _, tc := range []struct {
		name    string
		mod     func(*storagev1.VolumeAttachment)
		wantErr string
	}{
		{"no attacher", func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = "" }, "spec.attacher: Required value"},
		{"attacher not a driver name", func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = "a b" }, `spec.attacher: Invalid value: "a b"`},
		{"no node", func(va *storagev1.VolumeAttachment) { va.Spec.NodeName = "" }, `spec.nodeName: Invalid value: ""`},
		{"bad node name", func(va *storagev1.VolumeAttachment) { va.Spec.NodeName = "Node_1" }, `spec.nodeName: Invalid value: "Node_1"`},
		{"no source", func(va *storagev1.VolumeAttachment) { va.Spec.Source = storagev1.VolumeAttachmentSource{} },
			"spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName"},
		{"two sources", func(va *storagev1.VolumeAttachment) { va.Spec.Source.InlineVolumeSpec = inline.DeepCopy() },
			"spec.source: Forbidden: must specify exactly one of inlineVolumeSpec and persistentVolumeName"},
		{"empty volume name", func(va *storagev1.VolumeAttachment) { va.Spec.Source.PersistentVolumeName = ptr.To("") },
			"spec.source.persistentVolumeName: Required value"},
		{"inline CSI volume", func(va *storagev1.VolumeAttachment) {
			va.Spec.Source = storagev1.VolumeAttachmentSource{InlineVolumeSpec: inline.DeepCopy()}
		}, ""},
		{"inline volume without CSI", func(va *storagev1.VolumeAttachment) {
			va.Spec.Source = storagev1.VolumeAttachmentSource{InlineVolumeSpec: &corev1.PersistentVolumeSpec{
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}}}
		}, "spec.source.inlineVolumeSpec.csi: Required value"},
		{"inline volume with capacity", func(va *storagev1.VolumeAttachment) {
			s := inline.DeepCopy()
			s.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
			va.Spec.Source = storagev1.VolumeAttachmentSource{InlineVolumeSpec: s}
		}, "spec.source.inlineVolumeSpec.capacity: Forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrs(t, validateCreate(volumeAttachmentStrategy{}, attachment(tc.mod)), tc.wantErr)
		})
	}

	old := attachment(nil)
	cur := attachment(func(va *storagev1.VolumeAttachment) { va.Spec.NodeName = "n2"; va.Status.Attached = true })
	checkErrs(t, validateUpdate(volumeAttachmentStrategy{}, cur, old), "spec: Invalid value")
	if cur.Status.Attached {
		t.Errorf("an update of the main resource changed the status")
	}
	// The attacher reports through the status subresource, within upstream's limits.
	for _, tc := range []struct {
		name    string
		status  storagev1.VolumeAttachmentStatus
		wantErr string
	}{
		{"attached", storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"lun": "1"}}, ""},
		{"negative error code", storagev1.VolumeAttachmentStatus{AttachError: &storagev1.VolumeError{Message: "x", ErrorCode: ptr.To[int32](-1)}},
			"status.attachError.errorCode: Invalid value: -1"},
		{"long error message", storagev1.VolumeAttachmentStatus{DetachError: &storagev1.VolumeError{Message: strings.Repeat("x", 1025)}},
			"status.detachError.message: Too long"},
		{"large metadata", storagev1.VolumeAttachmentStatus{AttachmentMetadata: map[string]string{"k": strings.Repeat("x", maxAttachMetadataSize)}},
			"status.attachmentMetadata: Too long"},
	} {
		t.Run("status: "+tc.name, func(t *testing.T) {
			next := old.DeepCopy()
			volumeAttachmentStrategy{}.CopyStatus(next, &storagev1.VolumeAttachment{Status: tc.status})
			checkErrs(t, volumeAttachmentStrategy{}.ValidateStatusUpdate(next, old), tc.wantErr)
		})
	}
}

func TestCSIStorageCapacityStrategy(t *testing.T) {
	capacity := func(mod func(*storagev1.CSIStorageCapacity)) *storagev1.CSIStorageCapacity {
		c := &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: "csisc-1", Namespace: "kube-system", ResourceVersion: "1"},
			StorageClassName: "fast", Capacity: ptr.To(resource.MustParse("10Gi")),
			NodeTopology: &metav1.LabelSelector{MatchLabels: map[string]string{"topology.kubernetes.io/zone": "a"}}}
		if mod != nil {
			mod(c)
		}
		return c
	}
	for _, tc := range []struct {
		name    string
		mod     func(*storagev1.CSIStorageCapacity)
		wantErr string
	}{
		{"valid", nil, ""},
		{"no namespace", func(c *storagev1.CSIStorageCapacity) { c.Namespace = "" }, "metadata.namespace: Required value"},
		{"no class", func(c *storagev1.CSIStorageCapacity) { c.StorageClassName = "" }, `storageClassName: Invalid value: ""`},
		{"negative capacity", func(c *storagev1.CSIStorageCapacity) { c.Capacity = ptr.To(resource.MustParse("-1")) },
			`capacity: Invalid value: "-1": must be greater than or equal to 0`},
		{"bad topology", func(c *storagev1.CSIStorageCapacity) { c.NodeTopology.MatchLabels = map[string]string{"a/b/c": "x"} },
			"nodeTopology.matchLabels: Invalid value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrs(t, validateCreate(csiStorageCapacityStrategy{}, capacity(tc.mod)), tc.wantErr)
		})
	}
	old := capacity(nil)
	for _, tc := range []struct {
		name    string
		mod     func(*storagev1.CSIStorageCapacity)
		wantErr string
	}{
		{"capacity", func(c *storagev1.CSIStorageCapacity) { c.Capacity = ptr.To(resource.MustParse("5Gi")) }, ""},
		{"class", func(c *storagev1.CSIStorageCapacity) { c.StorageClassName = "slow" }, `storageClassName: Invalid value: "slow": field is immutable`},
		{"topology", func(c *storagev1.CSIStorageCapacity) { c.NodeTopology = nil }, "nodeTopology: Invalid value"},
	} {
		t.Run("update: "+tc.name, func(t *testing.T) {
			checkErrs(t, validateUpdate(csiStorageCapacityStrategy{}, capacity(tc.mod), old), tc.wantErr)
		})
	}
}

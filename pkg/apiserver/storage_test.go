package apiserver

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagev1ac "k8s.io/client-go/applyconfigurations/storage/v1"
	"k8s.io/utils/ptr"
)

// wantInvalid fails unless err is a 422 whose message mentions want.
func wantInvalid(t *testing.T, err error, want string) {
	t.Helper()
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("want Invalid with %q, got %v", want, err)
	}
}

// The storage.k8s.io kinds are discovered as kube-apiserver lists them.
func TestStorageDiscovery(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	list, err := ts.client.Discovery().ServerResourcesForGroupVersion("storage.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]metav1.APIResource{}
	for _, r := range list.APIResources {
		got[r.Name] = r
	}
	for _, want := range []struct {
		name, kind string
		namespaced bool
		short      string
	}{
		{"csidrivers", "CSIDriver", false, ""}, {"csinodes", "CSINode", false, ""},
		{"csistoragecapacities", "CSIStorageCapacity", true, ""}, {"storageclasses", "StorageClass", false, "sc"},
		{"volumeattachments", "VolumeAttachment", false, ""}, {"volumeattachments/status", "VolumeAttachment", false, ""},
	} {
		r, ok := got[want.name]
		if !ok || r.Kind != want.kind || r.Namespaced != want.namespaced || (want.short != "" && (len(r.ShortNames) != 1 || r.ShortNames[0] != want.short)) {
			t.Errorf("%s: got %+v (present %v)", want.name, r, ok)
		}
	}
}

func TestCSIDriverCRUD(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	drivers := ts.client.StorageV1().CSIDrivers()
	d, err := drivers.Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "csi.example.com"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := d.Spec
	if !*s.AttachRequired || *s.PodInfoOnMount || *s.StorageCapacity || *s.RequiresRepublish || *s.SELinuxMount ||
		*s.FSGroupPolicy != storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy || len(s.VolumeLifecycleModes) != 1 {
		t.Errorf("defaults not applied: %+v", s)
	}
	_, err = drivers.Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Driver"}}, metav1.CreateOptions{})
	wantInvalid(t, err, `CSIDriver.storage.k8s.io "Bad_Driver" is invalid: metadata.name: Invalid value: "Bad_Driver"`)

	d.Spec.PodInfoOnMount = ptr.To(true)
	if d, err = drivers.Update(ctx, d, metav1.UpdateOptions{}); err != nil || !*d.Spec.PodInfoOnMount || d.Generation != 1 {
		t.Fatalf("update podInfoOnMount: %v %+v", err, d)
	}
	_, err = drivers.Patch(ctx, d.Name, types.MergePatchType, []byte(`{"spec":{"attachRequired":false}}`), metav1.PatchOptions{})
	wantInvalid(t, err, "spec.attachedRequired: Invalid value: false: field is immutable")
	_, err = drivers.Patch(ctx, d.Name, types.MergePatchType, []byte(`{"spec":{"volumeLifecycleModes":["Ephemeral"]}}`), metav1.PatchOptions{})
	wantInvalid(t, err, "spec.volumeLifecycleModes: Invalid value")

	if l, err := drivers.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Fatalf("list: %v %+v", err, l)
	}
	if err := drivers.Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := drivers.Get(ctx, d.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v", err)
	}
}

func TestStorageClassCRUD(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	classes := ts.client.StorageV1().StorageClasses()
	sc, err := classes.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"},
		Provisioner: "csi.example.com", Parameters: map[string]string{"type": "ssd"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete || *sc.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		t.Errorf("defaults not applied: %+v", sc)
	}
	_, err = classes.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "none"}}, metav1.CreateOptions{})
	wantInvalid(t, err, `StorageClass.storage.k8s.io "none" is invalid: provisioner: Required value`)
	_, err = classes.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "recycle"}, Provisioner: "p",
		ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRecycle)}, metav1.CreateOptions{})
	wantInvalid(t, err, `reclaimPolicy: Unsupported value: "Recycle"`)

	for _, tc := range []struct{ name, patch, wantErr string }{
		{"expansion", `{"allowVolumeExpansion":true}`, ""},
		{"parameters", `{"parameters":{"type":"hdd"}}`, "parameters: Forbidden: updates to parameters are forbidden."},
		{"provisioner", `{"provisioner":"other.example.com"}`, "provisioner: Forbidden: updates to provisioner are forbidden."},
		{"reclaim policy", `{"reclaimPolicy":"Retain"}`, "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden."},
		{"binding mode", `{"volumeBindingMode":"WaitForFirstConsumer"}`, "volumeBindingMode: Invalid value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := classes.Patch(ctx, "fast", types.MergePatchType, []byte(tc.patch), metav1.PatchOptions{})
			if tc.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != "" {
				wantInvalid(t, err, tc.wantErr)
			}
		})
	}

	// Server-side apply knows the kind's schema.
	applied, err := classes.Apply(ctx, storagev1ac.StorageClass("local").WithProvisioner("kubernetes.io/no-provisioner").
		WithVolumeBindingMode(storagev1.VolumeBindingWaitForFirstConsumer), metav1.ApplyOptions{FieldManager: "test"})
	if err != nil || *applied.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer || len(applied.ManagedFields) == 0 {
		t.Fatalf("apply: %v %+v", err, applied)
	}
}

func TestCSINodeCRUD(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	nodes := ts.client.StorageV1().CSINodes()
	n := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
		{Name: "csi.example.com", NodeID: "n1", Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](10)}}}}}
	n, err := nodes.Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		mod     func(*storagev1.CSINode)
		wantErr string
	}{
		{"duplicate driver", func(n *storagev1.CSINode) { n.Spec.Drivers = append(n.Spec.Drivers, n.Spec.Drivers[0]) },
			`spec.drivers[1].name: Duplicate value: "csi.example.com"`},
		{"no nodeID", func(n *storagev1.CSINode) { n.Spec.Drivers[0].NodeID = "" }, "spec.drivers[0].nodeID: Required value"},
		{"long nodeID", func(n *storagev1.CSINode) { n.Spec.Drivers[0].NodeID = strings.Repeat("x", 257) }, "must be 256 characters or less"},
		{"negative count", func(n *storagev1.CSINode) { n.Spec.Drivers[0].Allocatable.Count = ptr.To[int32](-1) },
			"spec.drivers[0].allocatable.count: Invalid value: -1: must be greater than or equal to 0"},
		{"driver name too long", func(n *storagev1.CSINode) { n.Spec.Drivers[0].Name = strings.Repeat("d", 64) }, "may not be more than 63 bytes"},
		{"nodeID changed", func(n *storagev1.CSINode) { n.Spec.Drivers[0].NodeID = "other" }, "field is immutable"},
		{"count changed", func(n *storagev1.CSINode) { n.Spec.Drivers[0].Allocatable.Count = ptr.To[int32](20) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur, err := nodes.Get(ctx, "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tc.mod(cur)
			_, err = nodes.Update(ctx, cur, metav1.UpdateOptions{})
			if tc.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != "" {
				wantInvalid(t, err, tc.wantErr)
			}
		})
	}
}

func TestVolumeAttachmentCRUD(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	vas := ts.client.StorageV1().VolumeAttachments()
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "csi-1"}, Spec: storagev1.VolumeAttachmentSpec{
		Attacher: "csi.example.com", NodeName: "n1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv1")}},
		Status: storagev1.VolumeAttachmentStatus{Attached: true}}
	created, err := vas.Create(ctx, va, metav1.CreateOptions{})
	if err != nil || created.Status.Attached {
		t.Fatalf("create (status dropped): %v %+v", err, created)
	}
	bad := va.DeepCopy()
	bad.Name, bad.Spec.Source.InlineVolumeSpec = "csi-2", &corev1.PersistentVolumeSpec{}
	_, err = vas.Create(ctx, bad, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.source: Forbidden: must specify exactly one of inlineVolumeSpec and persistentVolumeName")
	bad.Spec.Source, bad.Spec.Attacher = storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv1")}, ""
	_, err = vas.Create(ctx, bad, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.attacher: Required value")

	_, err = vas.Patch(ctx, "csi-1", types.MergePatchType, []byte(`{"spec":{"nodeName":"n2"}}`), metav1.PatchOptions{})
	wantInvalid(t, err, "spec: Invalid value")
	// The attacher reports through the status subresource; the main resource leaves the status alone.
	created.Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"lun": "1"}}
	updated, err := vas.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil || !updated.Status.Attached {
		t.Fatalf("update status: %v %+v", err, updated)
	}
	updated.Status.Attached = false
	updated.Labels = map[string]string{"a": "b"}
	if updated, err = vas.Update(ctx, updated, metav1.UpdateOptions{}); err != nil || !updated.Status.Attached {
		t.Fatalf("update of the main resource: %v %+v", err, updated)
	}
	_, err = vas.Patch(ctx, "csi-1", types.MergePatchType, []byte(`{"status":{"attachError":{"message":"x","errorCode":-1}}}`),
		metav1.PatchOptions{}, "status")
	wantInvalid(t, err, "status.attachError.errorCode: Invalid value: -1")
}

func TestCSIStorageCapacityCRUD(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	caps := ts.client.StorageV1().CSIStorageCapacities("kube-system")
	c := &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: "csisc-1"}, StorageClassName: "fast",
		Capacity: ptr.To(resource.MustParse("10Gi"))}
	if _, err := caps.Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	neg := c.DeepCopy()
	neg.Name, neg.Capacity = "csisc-2", ptr.To(resource.MustParse("-1Gi"))
	_, err := caps.Create(ctx, neg, metav1.CreateOptions{})
	wantInvalid(t, err, `capacity: Invalid value: "-1Gi": must be greater than or equal to 0`)
	if _, err := ts.client.StorageV1().CSIStorageCapacities("nope").Create(ctx, c, metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("create in a missing namespace: %v", err)
	}
	if l, err := ts.client.StorageV1().CSIStorageCapacities("").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Fatalf("list across namespaces: %v %+v", err, l)
	}
	_, err = caps.Patch(ctx, "csisc-1", types.MergePatchType, []byte(`{"storageClassName":"slow"}`), metav1.PatchOptions{})
	wantInvalid(t, err, `storageClassName: Invalid value: "slow": field is immutable`)
	if _, err := caps.Patch(ctx, "csisc-1", types.MergePatchType, []byte(`{"capacity":"5Gi"}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("capacity update: %v", err)
	}
}

// kubectl get prints the storage kinds with kube-apiserver's columns.
func TestStorageTables(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	st := ts.client.StorageV1()
	if _, err := st.StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast",
		Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "csi.example.com"},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "csi.example.com"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		resource string
		columns  string
		row      string
	}{
		{"storageclasses", "Name,Provisioner,ReclaimPolicy,VolumeBindingMode,AllowVolumeExpansion,Age",
			`["fast (default)","csi.example.com","Delete","Immediate",false,`},
		{"csidrivers", "Name,AttachRequired,PodInfoOnMount,StorageCapacity,TokenRequests,RequiresRepublish,Modes,Age",
			`["csi.example.com",true,false,false,"\u003cunset\u003e",false,"Persistent",`},
		{"csinodes", "Name,Drivers,Age", ""},
		{"volumeattachments", "Name,Attacher,PV,Node,Attached,Age", ""},
		{"csistoragecapacities", "Name,StorageClassName,Capacity", ""},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			raw, err := st.RESTClient().Get().Resource(tc.resource).SetHeader("Accept", tableAccept).DoRaw(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var tbl metav1.Table
			if err := json.Unmarshal(raw, &tbl); err != nil {
				t.Fatal(err)
			}
			var cols []string
			for _, c := range tbl.ColumnDefinitions {
				cols = append(cols, c.Name)
			}
			if strings.Join(cols, ",") != tc.columns {
				t.Errorf("columns %v, want %s", cols, tc.columns)
			}
			if tc.row != "" {
				cells, _ := json.Marshal(tbl.Rows[0].Cells)
				if !strings.HasPrefix(string(cells), tc.row) {
					t.Errorf("row %s, want it to begin %s", cells, tc.row)
				}
			}
		})
	}
}

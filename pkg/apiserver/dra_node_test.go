package apiserver

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Slices are selected by spec.nodeName and spec.driver, as the kubelet wipes and drivers list them; driver,
// pool and node never change, and exactly one node selection is required.
func TestResourceSliceCRUD(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	slices := ts.client.ResourceV1().ResourceSlices()
	for _, s := range []*resourcev1.ResourceSlice{testNodeSlice("n1-a", "n1", "a.example.com"), testNodeSlice("n1-b", "n1", "b.example.com"),
		testNodeSlice("n2-a", "n2", "a.example.com")} {
		got, err := slices.Create(ctx, s, metav1.CreateOptions{})
		if err != nil || got.Generation != 1 {
			t.Fatalf("create %s: %v %+v", s.Name, err, got)
		}
	}
	net := testNodeSlice("net", "", "a.example.com")
	net.Spec.NodeName, net.Spec.AllNodes, net.Spec.Pool.Name = nil, ptr.To(true), "net"
	if _, err := slices.Create(ctx, net, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for sel, want := range map[string]string{
		"spec.nodeName=n1":                           "n1-a,n1-b",
		"spec.driver=a.example.com,spec.nodeName=n1": "n1-a",
		"spec.driver=a.example.com":                  "n1-a,n2-a,net",
		"spec.nodeName=":                             "net",
	} {
		l, err := slices.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		var names []string
		for _, s := range l.Items {
			names = append(names, s.Name)
		}
		if got := strings.Join(names, ","); got != want {
			t.Errorf("%s: got %s, want %s", sel, got, want)
		}
	}
	s, err := slices.Patch(ctx, "n1-a", types.MergePatchType, []byte(`{"spec":{"pool":{"generation":1}}}`), metav1.PatchOptions{})
	if err != nil || s.Generation != 2 {
		t.Fatalf("spec patch: %v %+v", err, s)
	}
	_, err = slices.Patch(ctx, "n1-a", types.MergePatchType, []byte(`{"spec":{"nodeName":"n3"}}`), metav1.PatchOptions{})
	wantInvalid(t, err, `spec.nodeName: Invalid value: "n3": field is immutable`)
	_, err = slices.Patch(ctx, "n1-a", types.MergePatchType, []byte(`{"spec":{"driver":"c.example.com"}}`), metav1.PatchOptions{})
	wantInvalid(t, err, "spec.driver: Invalid value")

	bad := testNodeSlice("bad", "n1", "a.example.com")
	bad.Spec.AllNodes = ptr.To(true)
	_, err = slices.Create(ctx, bad, metav1.CreateOptions{})
	wantInvalid(t, err, "spec: Invalid value: \"{`nodeName`, `allNodes`}\": exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set")
	bad = testNodeSlice("bad", "n1", "a.example.com")
	bad.Spec.Pool.ResourceSliceCount = 0
	bad.Spec.Devices = append(bad.Spec.Devices, resourcev1.Device{Name: "Device_2"})
	_, err = slices.Create(ctx, bad, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero")
	wantInvalid(t, err, `spec.devices[2].name: Invalid value: "Device_2"`)

	if err := slices.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"}); err != nil {
		t.Fatal(err)
	}
	if l, err := slices.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 2 {
		t.Fatalf("after deleting n1's slices: %v %+v", err, l)
	}
}

// A node's kubelet and DRA drivers get the claims of its pods and keep the slices of its node, as upstream's Node
// authorizer and NodeRestriction allow, with their messages.
func TestDRANodeAuthorization(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	rv := ts.client.ResourceV1()
	for _, name := range []string{"mine", "theirs"} {
		if _, err := rv.ResourceClaims("default").Create(ctx, testClaim(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := testPod("gpu")
	pod.Spec.NodeName = "n1"
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("mine")}}
	if _, err := ts.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rv.ResourceSlices().Create(ctx, testNodeSlice("n2-slice", "n2", "a.example.com"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := nodeClient(t, ts, "n1").ResourceV1()
	for _, tc := range []struct {
		name string
		want string // "" allowed, else a part of the Forbidden message
		do   func() error
	}{
		{"get its pod's claim", "", func() error {
			_, err := node.ResourceClaims("default").Get(ctx, "mine", metav1.GetOptions{})
			return err
		}},
		{"get another claim", "forbidden", func() error {
			_, err := node.ResourceClaims("default").Get(ctx, "theirs", metav1.GetOptions{})
			return err
		}},
		{"list claims", "forbidden", func() error { _, err := node.ResourceClaims("default").List(ctx, metav1.ListOptions{}); return err }},
		{"update its claim's status", "forbidden", func() error {
			_, err := node.ResourceClaims("default").Patch(ctx, "mine", types.MergePatchType, []byte(`{"status":{}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"create its slice", "", func() error {
			_, err := node.ResourceSlices().Create(ctx, testNodeSlice("n1-slice", "n1", "a.example.com"), metav1.CreateOptions{})
			return err
		}},
		{"create another node's slice", `resourceslices.resource.k8s.io "n3-slice" is forbidden: can only create ResourceSlice with the same NodeName as the requesting node`,
			func() error {
				_, err := node.ResourceSlices().Create(ctx, testNodeSlice("n3-slice", "n3", "a.example.com"), metav1.CreateOptions{})
				return err
			}},
		{"get its slice", "", func() error { _, err := node.ResourceSlices().Get(ctx, "n1-slice", metav1.GetOptions{}); return err }},
		{"patch its slice", "", func() error {
			_, err := node.ResourceSlices().Patch(ctx, "n1-slice", types.MergePatchType, []byte(`{"spec":{"pool":{"generation":2}}}`), metav1.PatchOptions{})
			return err
		}},
		{"get another node's slice", "forbidden", func() error {
			_, err := node.ResourceSlices().Get(ctx, "n2-slice", metav1.GetOptions{})
			return err
		}},
		{"delete another node's slice", "forbidden", func() error {
			return node.ResourceSlices().Delete(ctx, "n2-slice", metav1.DeleteOptions{})
		}},
		{"list slices", "can only list/watch/deletecollection resourceslices with nodeName field selector", func() error {
			_, err := node.ResourceSlices().List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list another node's slices", "can only list/watch/deletecollection resourceslices with nodeName field selector", func() error {
			_, err := node.ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n2"})
			return err
		}},
		{"list its driver's slices", "", func() error {
			l, err := node.ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=a.example.com,spec.nodeName=n1"})
			if err == nil && len(l.Items) != 1 {
				t.Errorf("listed %d slices", len(l.Items))
			}
			return err
		}},
		{"watch its slices", "", func() error {
			w, err := node.ResourceSlices().Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"get a device class", "forbidden", func() error { _, err := node.DeviceClasses().Get(ctx, "gpu", metav1.GetOptions{}); return err }},
		{"wipe its slices", "", func() error {
			return node.ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
		}},
	} {
		err := tc.do()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: want allowed, got %v", tc.name, err)
		case tc.want != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: want Forbidden with %q, got %v", tc.name, tc.want, err)
		}
	}
	if l, err := rv.ResourceSlices().List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 || l.Items[0].Name != "n2-slice" {
		t.Errorf("slices left: %v %+v", err, l)
	}
}

// The garbage collector deletes a pod's claims with the pod and a node's slices with the Node.
func TestDRAGarbageCollection(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	pod, err := ts.client.CoreV1().Pods("default").Create(ctx, testPod("owner"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim := testClaim("owner-gpu-x1y2z")
	claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	claims := ts.client.ResourceV1().ResourceClaims("default")
	if _, err := claims.Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice := testNodeSlice("n1-slice", "n1", "a.example.com")
	slice.OwnerReferences = ownedBy("Node", "n1", n.UID, false)
	slices := ts.client.ResourceV1().ResourceSlices()
	if _, err := nodeClient(t, ts, "n1").ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ts.client.CoreV1().Pods("default").Delete(ctx, "owner", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if err := ts.client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod's claim collected", func() bool {
		_, err := claims.Get(ctx, claim.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	eventually(t, "node's slice collected", func() bool {
		_, err := slices.Get(ctx, slice.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// kubectl get shows upstream's columns for the resource.k8s.io kinds.
func TestDRATables(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	rv := ts.client.ResourceV1()
	if _, err := rv.ResourceClaims("default").Create(ctx, testClaim("c1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rv.ResourceSlices().Create(ctx, testNodeSlice("s1", "n1", "a.example.com"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rc := rv.RESTClient()
	for _, tc := range []struct {
		resource, ns string
		columns      string
		row          string // the cells before Age
	}{
		{"deviceclasses", "", "Name,Age", ""},
		{"resourceclaimtemplates", "default", "Name,Age", ""},
		{"resourceclaims", "default", "Name,State,Age", "c1,pending"},
		{"resourceslices", "", "Name,Node,Driver,Pool,Age", "s1,n1,a.example.com,n1"},
	} {
		raw, err := rc.Get().Namespace(tc.ns).Resource(tc.resource).SetHeader("Accept", tableAccept).DoRaw(ctx)
		if err != nil {
			t.Fatalf("%s: %v", tc.resource, err)
		}
		var tbl metav1.Table
		if err := json.Unmarshal(raw, &tbl); err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, c := range tbl.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		if got := strings.Join(cols, ","); got != tc.columns {
			t.Errorf("%s columns: %s", tc.resource, got)
		}
		if tc.row == "" {
			continue
		}
		if len(tbl.Rows) != 1 {
			t.Fatalf("%s rows: %s", tc.resource, raw)
		}
		var cells []string
		for _, c := range tbl.Rows[0].Cells[:len(tbl.Rows[0].Cells)-1] {
			cells = append(cells, c.(string))
		}
		if got := strings.Join(cells, ","); got != tc.row {
			t.Errorf("%s row: %s", tc.resource, got)
		}
	}
}

// A pod's spec.resourceClaims and its containers' references to them are checked as upstream checks them.
func TestPodResourceClaimsValidation(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	pods := ts.client.CoreV1().Pods("default")
	withClaims := func(name string, claims []corev1.PodResourceClaim, refs ...corev1.ResourceClaim) *corev1.Pod {
		p := testPod(name)
		p.Spec.ResourceClaims = claims
		p.Spec.Containers[0].Resources.Claims = refs
		return p
	}
	ok := withClaims("ok", []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("t")},
		{Name: "nic", ResourceClaimName: ptr.To("shared")}}, corev1.ResourceClaim{Name: "gpu"}, corev1.ResourceClaim{Name: "nic", Request: "r"})
	if _, err := pods.Create(ctx, ok, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{withClaims("both", []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c"), ResourceClaimTemplateName: ptr.To("t")}}),
			"spec.resourceClaims[0]: Invalid value: ",
		},
		{withClaims("neither", []corev1.PodResourceClaim{{Name: "gpu"}}), "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"},
		{withClaims("badname", []corev1.PodResourceClaim{{Name: "GPU", ResourceClaimName: ptr.To("c")}}), `spec.resourceClaims[0].name: Invalid value: "GPU"`},
		{withClaims("dup", []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c")}, {Name: "gpu", ResourceClaimName: ptr.To("d")}}),
			`spec.resourceClaims[1].name: Duplicate value: "gpu"`},
		{withClaims("badclaim", []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("C_1")}}),
			`spec.resourceClaims[0].resourceClaimName: Invalid value: "C_1"`},
		{withClaims("unknownref", []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c")}}, corev1.ResourceClaim{Name: "nic"}),
			`spec.containers[0].resources.claims[0]: Not found: "nic": must be one of the names in pod.spec.resourceClaims: gpu`},
		{withClaims("noclaims", nil, corev1.ResourceClaim{Name: "nic"}),
			"must be one of the names in pod.spec.resourceClaims which is empty"},
		{withClaims("dupref", []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c")}},
			corev1.ResourceClaim{Name: "gpu", Request: "a"}, corev1.ResourceClaim{Name: "gpu"}),
			`spec.containers[0].resources.claims[1]: Duplicate value: "gpu"`},
	} {
		_, err := pods.Create(ctx, tc.pod, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want Invalid with %q, got %v", tc.pod.Name, tc.want, err)
		}
	}
	// The claim controller records the generated claim's name; only for a claim of the spec.
	_, err := pods.Patch(ctx, "ok", types.MergePatchType, []byte(`{"status":{"resourceClaimStatuses":[{"name":"gpu","resourceClaimName":"ok-gpu-abcde"}]}}`),
		metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatalf("resourceClaimStatuses: %v", err)
	}
	_, err = pods.Patch(ctx, "ok", types.MergePatchType, []byte(`{"status":{"resourceClaimStatuses":[{"name":"nosuch","resourceClaimName":"x"}]}}`),
		metav1.PatchOptions{}, "status")
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "must match the name of an entry in `spec.resourceClaims`") {
		t.Errorf("unknown resourceClaimStatuses entry: %v", err)
	}
}

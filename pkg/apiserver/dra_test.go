package apiserver

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// celSelector selects devices by an expression.
func celSelector(expr string) []resourcev1.DeviceSelector {
	return []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}
}

// testClaim asks for one device of class gpu, without the defaults.
func testClaim(name string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceClaimSpec{
		Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu"}}}}}}
}

// testNodeSlice publishes two devices of node's.
func testNodeSlice(name, node, driver string) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
		Driver: driver, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
		Devices: []resourcev1.Device{{Name: "device-00"}, {Name: "device-01",
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To("a100")}}}}}}
}

// The resource.k8s.io/v1 kinds are discovered as kube-apiserver lists them.
func TestDRADiscovery(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	list, err := ts.client.Discovery().ServerResourcesForGroupVersion("resource.k8s.io/v1")
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
	}{
		{"deviceclasses", "DeviceClass", false}, {"resourceclaims", "ResourceClaim", true},
		{"resourceclaims/status", "ResourceClaim", true}, {"resourceclaimtemplates", "ResourceClaimTemplate", true},
		{"resourceslices", "ResourceSlice", false},
	} {
		if r, ok := got[want.name]; !ok || r.Kind != want.kind || r.Namespaced != want.namespaced {
			t.Errorf("%s: got %+v (present %v)", want.name, r, ok)
		}
	}
}

func TestDeviceClassCRUD(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	classes := ts.client.ResourceV1().DeviceClasses()
	c, err := classes.Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourcev1.DeviceClassSpec{
		Selectors: celSelector(`device.driver == "gpu.example.com"`)}}, metav1.CreateOptions{})
	if err != nil || c.Generation != 1 {
		t.Fatalf("create: %v %+v", err, c)
	}
	c.Spec.Selectors = celSelector(`device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "a100"`)
	if c, err = classes.Update(ctx, c, metav1.UpdateOptions{}); err != nil || c.Generation != 2 {
		t.Fatalf("update selectors: %v %+v", err, c)
	}
	if c, err = classes.Patch(ctx, "gpu", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{}); err != nil || c.Generation != 2 {
		t.Fatalf("label patch: %v %+v", err, c)
	}
	_, err = classes.Patch(ctx, "gpu", types.MergePatchType, []byte(`{"spec":{"selectors":[{"cel":{"expression":"device.driver =="}}]}}`), metav1.PatchOptions{})
	wantInvalid(t, err, `spec.selectors[0].cel.expression: Invalid value: "device.driver ==": compilation failed: ERROR: <input>:1:17: Syntax error`)

	for _, tc := range []struct {
		name string
		spec resourcev1.DeviceClassSpec
		want string
	}{
		{"Bad_Name", resourcev1.DeviceClassSpec{}, `DeviceClass.resource.k8s.io "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"`},
		{"not-bool", resourcev1.DeviceClassSpec{Selectors: celSelector(`device.driver`)},
			`spec.selectors[0].cel.expression: Invalid value: "device.driver": must evaluate to bool`},
		{"unknown", resourcev1.DeviceClassSpec{Selectors: celSelector(`device.nosuch == 1`)},
			`undefined field 'nosuch'`},
		{"empty", resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{}}}, "spec.selectors[0].cel: Required value"},
		{"array-params", resourcev1.DeviceClassSpec{Config: []resourcev1.DeviceClassConfiguration{{DeviceConfiguration: resourcev1.DeviceConfiguration{
			Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: "gpu.example.com", Parameters: runtime.RawExtension{Raw: []byte(`[1]`)}}}}}},
			"spec.config[0].opaque.parameters: Invalid value: \"<value omitted>\": must be a valid JSON object"},
		{"bad-driver", resourcev1.DeviceClassSpec{Config: []resourcev1.DeviceClassConfiguration{{DeviceConfiguration: resourcev1.DeviceConfiguration{
			Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: "Not_A_Driver", Parameters: runtime.RawExtension{Raw: []byte(`{}`)}}}}}},
			`spec.config[0].opaque.driver: Invalid value: "Not_A_Driver"`},
	} {
		_, err := classes.Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: tc.name}, Spec: tc.spec}, metav1.CreateOptions{})
		wantInvalid(t, err, tc.want)
	}
	if l, err := classes.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Fatalf("list: %v %+v", err, l)
	}
	if err := classes.Delete(ctx, "gpu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestResourceClaimCRUD(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	claims := ts.client.ResourceV1().ResourceClaims("default")
	in := testClaim("c1")
	in.Spec.Devices.Requests = append(in.Spec.Devices.Requests, resourcev1.DeviceRequest{Name: "any",
		FirstAvailable: []resourcev1.DeviceSubRequest{{Name: "big", DeviceClassName: "gpu", Selectors: celSelector(`device.attributes["gpu.example.com"].model == "a100"`)},
			{Name: "all", DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeAll}}})
	in.Status.Allocation = &resourcev1.AllocationResult{} // cleared on create
	c, err := claims.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e := c.Spec.Devices.Requests[0].Exactly; e.AllocationMode != resourcev1.DeviceAllocationModeExactCount || e.Count != 1 {
		t.Errorf("exactly defaults: %+v", e)
	}
	fa := c.Spec.Devices.Requests[1].FirstAvailable
	if fa[0].AllocationMode != resourcev1.DeviceAllocationModeExactCount || fa[0].Count != 1 ||
		fa[1].AllocationMode != resourcev1.DeviceAllocationModeAll || fa[1].Count != 0 {
		t.Errorf("subrequest defaults: %+v", fa)
	}
	if c.Status.Allocation != nil {
		t.Errorf("status kept on create: %+v", c.Status)
	}

	// The spec never changes; metadata does.
	_, err = claims.Patch(ctx, "c1", types.MergePatchType, []byte(`{"spec":{"devices":{"requests":[{"name":"x","exactly":{"deviceClassName":"gpu"}}]}}}`), metav1.PatchOptions{})
	wantInvalid(t, err, "spec: Invalid value")
	wantInvalid(t, err, "field is immutable")
	if _, err = claims.Patch(ctx, "c1", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("label patch: %v", err)
	}

	// The status is written through its subresource only.
	pod, err := ts.client.CoreV1().Pods("default").Create(ctx, testPod("user"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := `{"devices":{"results":[{"request":"gpu","driver":"gpu.example.com","pool":"n1","device":"device-00",` +
		`"tolerations":[{"key":"k","value":"v"}]}]}}`
	if _, err = claims.Patch(ctx, "c1", types.MergePatchType, []byte(`{"status":{"allocation":`+alloc+`}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if c, _ = claims.Get(ctx, "c1", metav1.GetOptions{}); c.Status.Allocation != nil {
		t.Fatalf("status written through the main resource: %+v", c.Status)
	}
	_, err = claims.Patch(ctx, "c1", types.MergePatchType, []byte(`{"status":{"reservedFor":[{"resource":"pods","name":"user","uid":"`+
		string(pod.UID)+`"}]}}`), metav1.PatchOptions{}, "status")
	wantInvalid(t, err, "status.reservedFor: Forbidden: may not be specified when `allocated` is not set")
	bad := `{"devices":{"results":[{"request":"nosuch","driver":"gpu.example.com","pool":"n1","device":"device-00"}]}}`
	_, err = claims.Patch(ctx, "c1", types.MergePatchType, []byte(`{"status":{"allocation":`+bad+`}}`), metav1.PatchOptions{}, "status")
	wantInvalid(t, err, `status.allocation.devices.results[0].request: Invalid value: "nosuch"`)
	c, err = claims.Patch(ctx, "c1", types.MergePatchType, []byte(`{"status":{"allocation":`+alloc+`,"reservedFor":[{"resource":"pods","name":"user","uid":"`+
		string(pod.UID)+`"}]}}`), metav1.PatchOptions{}, "status")
	if err != nil || c.Status.Allocation == nil || len(c.Status.ReservedFor) != 1 {
		t.Fatalf("allocate: %v %+v", err, c)
	}
	if tol := c.Status.Allocation.Devices.Results[0].Tolerations; len(tol) != 1 || tol[0].Operator != resourcev1.DeviceTolerationOpEqual {
		t.Errorf("toleration defaults: %+v", tol)
	}
	_, err = claims.Patch(ctx, "c1", types.MergePatchType, []byte(`{"status":{"allocation":{"devices":{"results":[{"request":"gpu",`+
		`"driver":"gpu.example.com","pool":"n1","device":"device-01"}]}}}}`), metav1.PatchOptions{}, "status")
	wantInvalid(t, err, "status.allocation: Invalid value")
	if c, err = claims.Patch(ctx, "c1", types.MergePatchType, []byte(`{"status":{"allocation":null,"reservedFor":null}}`),
		metav1.PatchOptions{}, "status"); err != nil || c.Status.Allocation != nil {
		t.Fatalf("deallocate: %v %+v", err, c)
	}
	if err := claims.Delete(ctx, "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Claims and templates the API refuses, with upstream's messages.
func TestResourceClaimValidation(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	claims := ts.client.ResourceV1().ResourceClaims("default")
	req := func(r resourcev1.DeviceRequest) *resourcev1.ResourceClaim {
		c := testClaim("c")
		c.Spec.Devices.Requests = []resourcev1.DeviceRequest{r}
		return c
	}
	exactly := &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu"}
	for _, tc := range []struct {
		name  string
		claim *resourcev1.ResourceClaim
		want  string
	}{
		{"both", req(resourcev1.DeviceRequest{Name: "r", Exactly: exactly, FirstAvailable: []resourcev1.DeviceSubRequest{{Name: "s", DeviceClassName: "gpu"}}}),
			"spec.devices.requests[0]: Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"},
		{"neither", req(resourcev1.DeviceRequest{Name: "r"}),
			"spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required"},
		{"bad request name", req(resourcev1.DeviceRequest{Name: "R_1", Exactly: exactly}), `spec.devices.requests[0].name: Invalid value: "R_1"`},
		{"no class", req(resourcev1.DeviceRequest{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{}}),
			"spec.devices.requests[0].exactly.deviceClassName: Required value"},
		{"bad CEL", req(resourcev1.DeviceRequest{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu",
			Selectors: celSelector(`device.attributes["x"].y ==`)}}), "spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value"},
		{"count with All", req(resourcev1.DeviceRequest{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu",
			AllocationMode: resourcev1.DeviceAllocationModeAll, Count: 2}}),
			"spec.devices.requests[0].exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'"},
		{"bad mode", req(resourcev1.DeviceRequest{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: "Some"}}),
			`spec.devices.requests[0].exactly.allocationMode: Unsupported value: "Some"`},
		{"bad name", func() *resourcev1.ResourceClaim { c := testClaim("Bad_Claim"); return c }(), `metadata.name: Invalid value: "Bad_Claim"`},
		{"config for a missing request", func() *resourcev1.ResourceClaim {
			c := testClaim("c")
			c.Spec.Devices.Config = []resourcev1.DeviceClaimConfiguration{{Requests: []string{"nosuch"}, DeviceConfiguration: resourcev1.DeviceConfiguration{
				Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: "gpu.example.com", Parameters: runtime.RawExtension{Raw: []byte(`{"a":"b"}`)}}}}}
			return c
		}(), `spec.devices.config[0].requests[0]: Invalid value: "nosuch": must be the name of a request in the claim`},
		{"duplicate requests", func() *resourcev1.ResourceClaim {
			c := testClaim("c")
			c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, c.Spec.Devices.Requests[0])
			return c
		}(), `spec.devices.requests[1]: Duplicate value: "gpu"`},
	} {
		_, err := claims.Create(ctx, tc.claim, metav1.CreateOptions{})
		wantInvalid(t, err, tc.want)
	}

	// Admin access needs the namespace's label.
	admin := testClaim("admin")
	admin.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
	_, err := claims.Create(ctx, admin, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.devices.requests[0].adminAccess: Forbidden: admin access to devices requires the "+
		"`resource.kubernetes.io/admin-access: true` label on the containing namespace")
	if _, err := ts.client.CoreV1().Namespaces().Patch(ctx, "default", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"resource.kubernetes.io/admin-access":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := claims.Create(ctx, admin, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin access in a labelled namespace: %v", err)
	}

	templates := ts.client.ResourceV1().ResourceClaimTemplates("default")
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Spec: resourcev1.ResourceClaimTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}}, Spec: testClaim("").Spec}}
	got, err := templates.Create(ctx, tmpl, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e := got.Spec.Spec.Devices.Requests[0].Exactly; e.AllocationMode != resourcev1.DeviceAllocationModeExactCount || e.Count != 1 {
		t.Errorf("template defaults: %+v", e)
	}
	_, err = templates.Patch(ctx, "t", types.MergePatchType, []byte(`{"spec":{"metadata":{"labels":{"app":"y"}}}}`), metav1.PatchOptions{})
	wantInvalid(t, err, "field is immutable")
	bad := tmpl.DeepCopy()
	bad.Name, bad.Spec.Spec.Devices.Requests[0].Exactly = "t2", nil
	_, err = templates.Create(ctx, bad, metav1.CreateOptions{})
	wantInvalid(t, err, "spec.spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required")
	if err := templates.Delete(ctx, "t", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

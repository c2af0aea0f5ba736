package registry

import (
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestDefaultDeviceClaim(t *testing.T) {
	c := resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
		{Name: "a", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "x", Tolerations: []resourcev1.DeviceToleration{{Key: "k"}}}},
		{Name: "b", FirstAvailable: []resourcev1.DeviceSubRequest{{Name: "s", DeviceClassName: "x", Count: 3,
			Tolerations: []resourcev1.DeviceToleration{{Key: "k", Operator: resourcev1.DeviceTolerationOpExists}}}}},
	}}
	DefaultDeviceClaim(&c)
	e, s := c.Requests[0].Exactly, c.Requests[1].FirstAvailable[0]
	if e.AllocationMode != resourcev1.DeviceAllocationModeExactCount || e.Count != 1 || e.Tolerations[0].Operator != resourcev1.DeviceTolerationOpEqual {
		t.Errorf("exactly: %+v", e)
	}
	if s.AllocationMode != resourcev1.DeviceAllocationModeExactCount || s.Count != 3 || s.Tolerations[0].Operator != resourcev1.DeviceTolerationOpExists {
		t.Errorf("subrequest: %+v", s)
	}
}

func TestResourceSliceFieldsAndGates(t *testing.T) {
	s := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: "d.example.com", AllNodes: ptr.To(true),
		Devices: []resourcev1.Device{{Name: "a", Taints: []resourcev1.DeviceTaint{{Key: "k", Effect: resourcev1.DeviceTaintEffectNoSchedule}}}}}}
	f := resourceSliceStrategy{}.Fields(s)
	if v, ok := f["spec.nodeName"]; !ok || v != "" || f["spec.driver"] != "d.example.com" {
		t.Errorf("fields: %v", f)
	}
	kept := s.DeepCopy()
	resourceSliceStrategy{}.PrepareForCreate(s)
	if s.Spec.Devices[0].Taints != nil || s.Generation != 1 {
		t.Errorf("taints of a disabled gate kept on create: %+v", s)
	}
	cur := kept.DeepCopy()
	resourceSliceStrategy{}.PrepareForUpdate(cur, kept)
	if cur.Spec.Devices[0].Taints == nil {
		t.Error("taints dropped although the old slice used them")
	}
}

func TestDRANames(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		fully      bool
	}{
		{"model", "", false},
		{"gpu.example.com/model", "", true},
		{"model", "a fully qualified name must be a domain and a name separated by a slash", true},
		{"/model", "the domain must not be empty", false},
		{"gpu.example.com/", "the name must not be empty", false},
		{"has-dash", "a valid C identifier must start", false},
		{strings.Repeat("a", 33), "may not be more than 32 bytes", false},
	} {
		var errs field.ErrorList
		if tc.fully {
			errs = validateFullyQualifiedName(tc.name, field.NewPath("n"))
		} else {
			errs = validateDRAQualifiedName(tc.name, field.NewPath("n"))
		}
		if got := errs.ToAggregate(); (tc.want == "") != (got == nil) || got != nil && !strings.Contains(got.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.name, got, tc.want)
		}
	}
	if errs := validatePoolName("node-1/gpus", field.NewPath("p")); len(errs) != 0 {
		t.Errorf("pool with a slash: %v", errs)
	}
	if errs := validateCELSelector(`device.capacity["d.example.com"].memory.compareTo(quantity("1Gi")) >= 0`, field.NewPath("e")); len(errs) != 0 {
		t.Errorf("valid selector: %v", errs)
	}
}

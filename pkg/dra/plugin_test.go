package dra

import (
	"context"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodeagent/kubelet/pkg/dra/state"
)

func TestChooseService(t *testing.T) {
	for _, tc := range []struct {
		services []string
		want     string
		err      string
	}{
		{nil, "", "empty list of supported gRPC services (aka supported versions)"},
		{[]string{"v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth"}, "v1.DRAPlugin", ""},
		{[]string{"v1beta1.DRAPlugin", "v1.DRAPlugin"}, "v1beta1.DRAPlugin", ""}, // the plugin's order
		{[]string{"v1alpha1.DRAResourceHealth", "v1beta1.DRAPlugin"}, "v1beta1.DRAPlugin", ""},
		{[]string{"1.0.0", "v1alpha3.Node"}, "", `none of services supported by the plugin (["1.0.0" "v1alpha3.Node"]) are supported by the kubelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])`},
	} {
		got, err := chooseService(tc.services)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("chooseService(%q) = %q, %v; want %q, %q", tc.services, got, err, tc.want, tc.err)
		}
	}
}

func TestRegistration(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	err := e.m.ValidatePlugin(testDriver, "/x.sock", []string{"v9.DRAPlugin"})
	if err == nil || !strings.HasPrefix(err.Error(), "invalid supported gRPC versions of DRA driver plugin drv.example.com at endpoint /x.sock: none of services") {
		t.Fatalf("validate: %v", err)
	}
	if err := e.m.ValidatePlugin(testDriver, "/x.sock", nil); err == nil {
		t.Fatal("no versions validated")
	}
	if err := e.m.ValidatePlugin(testDriver, "/x.sock", []string{drapbv1Service}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.RegisterPlugin(ctx, testDriver, "/x.sock", []string{"v9.DRAPlugin"}); err == nil {
		t.Fatal("unknown versions registered")
	}
	mustContain(t, e.m.RegisterPlugin(ctx, testDriver, e.endpoint, []string{drapbv1Service}),
		"endpoint "+e.endpoint+" already registered for DRA driver plugin "+testDriver)
	mustContain(t, e.m.RegisterPlugin(ctx, "", e.endpoint, []string{drapbv1Service}), "DRA driver name is empty")

	// A second endpoint: calls go to the newest, then back to the first when it goes.
	second := &fakeDriver{name: testDriver}
	secondSock := serve(t, second, t.TempDir(), false)
	if err := e.m.RegisterPlugin(ctx, testDriver, secondSock, []string{drapbv1Service}); err != nil {
		t.Fatal(err)
	}
	if got := e.m.Drivers(); len(got) != 2 || got[0].Endpoint != e.endpoint || got[1] != (DriverInfo{Name: testDriver, Endpoint: secondSock, Service: drapbv1Service}) {
		t.Fatalf("drivers %+v", got)
	}
	pod := newPod("p", "pod-1", direct("gpu", "claim-1"))
	if _, err := e.cs.ResourceV1().ResourceClaims(ns).Create(ctx, newClaim("claim-1", "uid-1", pod), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	e.m.DeRegisterPlugin(ctx, testDriver, secondSock)
	if err := e.m.Unprepare(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	p1, u1 := e.drv.calls()
	p2, u2 := second.calls()
	if len(p1) != 0 || len(u1) != 1 || len(p2) != 1 || len(u2) != 0 {
		t.Fatalf("first driver %v %v, second %v %v", p1, u1, p2, u2)
	}

	// Without endpoints, the driver is not registered: a pod fails before anything is cached.
	e.m.DeRegisterPlugin(ctx, testDriver, e.endpoint)
	if len(e.m.Drivers()) != 0 {
		t.Fatal("drivers left")
	}
	err = e.m.Prepare(ctx, pod)
	mustContain(t, err, "DRA driver drv.example.com is not registered")
	if c, d, _ := e.m.Waiting(pod.UID); c != "claim-1" || d != testDriver {
		t.Fatalf("waiting %q %q", c, d)
	}
	if e.m.Holds(pod.UID) {
		t.Fatal("a pod whose driver is missing is held")
	}
}

func TestNewClaimInfo(t *testing.T) {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "n", UID: "u"}}
	if _, err := newClaimInfo(claim); err == nil || err.Error() != "not allocated" {
		t.Fatalf("unallocated: %v", err)
	}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Driver: "b", Device: "1"}, {Driver: "a", Device: "2"}, {Driver: "b", Device: "3"}}}}
	info, err := newClaimInfo(claim)
	if err != nil || info.ClaimUID != "u" || info.ClaimName != "c" || info.Namespace != "n" || info.PodUIDs.Len() != 0 ||
		!reflect.DeepEqual(info.drivers(), []string{"a", "b"}) || info.prepared {
		t.Fatalf("%+v, %v", info, err)
	}
}

func TestCDIDevices(t *testing.T) {
	info := &claimInfo{ClaimInfoState: state.ClaimInfoState{DriverState: map[string]state.DriverState{
		"b": {Devices: []state.Device{{RequestNames: []string{"r1"}, CDIDeviceIDs: []string{"b/x=1"}}}},
		"a": {Devices: []state.Device{
			{RequestNames: []string{"r1", "r2"}, CDIDeviceIDs: []string{"a/x=1", "a/x=2"}},
			{RequestNames: nil, CDIDeviceIDs: []string{"a/x=any"}},
			{RequestNames: []string{"r3"}, CDIDeviceIDs: nil},
		}},
	}}}
	for _, tc := range []struct {
		request string
		want    []string
	}{
		{"", []string{"a/x=1", "a/x=2", "a/x=any", "b/x=1"}},
		{"r1", []string{"a/x=1", "a/x=2", "a/x=any", "b/x=1"}},
		{"r2", []string{"a/x=1", "a/x=2", "a/x=any"}},
		{"r3", []string{"a/x=any"}},
		{"nope", []string{"a/x=any"}},
	} {
		if got := info.cdiDevices(tc.request); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("cdiDevices(%q) = %v, want %v", tc.request, got, tc.want)
		}
	}
}

func TestCacheCounts(t *testing.T) {
	mk := func(name string, prepared bool, pods []string, drivers ...string) *claimInfo {
		info := &claimInfo{ClaimInfoState: state.ClaimInfoState{ClaimName: name, Namespace: "n", PodUIDs: sets.New(pods...),
			DriverState: map[string]state.DriverState{}}, prepared: prepared}
		for _, d := range drivers {
			info.DriverState[d] = state.DriverState{}
		}
		return info
	}
	for _, tc := range []struct {
		name   string
		claims []*claimInfo
		inUse  map[string]int
		gone   []types.UID
	}{
		{"empty", nil, map[string]int{anyDriver: 0}, []types.UID{}},
		{"mixed", []*claimInfo{
			mk("c1", true, []string{"p1", "p2"}, "a", "b"),
			mk("c2", true, []string{"p3"}, "a"),
			mk("c3", false, []string{"p4"}, "b"),
		}, map[string]int{anyDriver: 2, "a": 2, "b": 1}, []types.UID{"p2", "p3", "p4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &claimCache{claims: map[string]*claimInfo{}}
			for _, info := range tc.claims {
				c.add(info)
			}
			if got := c.claimsInUse(); !reflect.DeepEqual(got, tc.inUse) {
				t.Errorf("claimsInUse = %v, want %v", got, tc.inUse)
			}
			if got := c.podsNotIn(sets.New("p1")); !reflect.DeepEqual(got, tc.gone) {
				t.Errorf("podsNotIn = %v, want %v", got, tc.gone)
			}
			if c.hasPod("p9") || (len(tc.claims) > 0 && !c.hasPod("p4")) {
				t.Error("hasPod")
			}
		})
	}
}

func TestPodResourcesSelection(t *testing.T) {
	pod := newPod("p", "pod-1", direct("gpu", "claim-1"), direct("nic", "claim-2"))
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "nic"}}}}}
	share := types.UID("share-1")
	m := &Manager{cache: &claimCache{claims: map[string]*claimInfo{}}}
	m.cache.add(&claimInfo{ClaimInfoState: state.ClaimInfoState{ClaimName: "claim-2", Namespace: ns, DriverState: map[string]state.DriverState{
		"d": {Devices: []state.Device{{PoolName: "p", DeviceName: "d1", ShareID: &share, CDIDeviceIDs: []string{"d/x=1"}},
			{PoolName: "p", DeviceName: "d2", CDIDeviceIDs: []string{"d/x=2"}}}}}}})
	got := m.PodResources(pod, "init")
	if len(got) != 1 || got[0].ClaimName != "claim-2" || len(got[0].ClaimResources) != 2 ||
		got[0].ClaimResources[0].GetShareId() != "share-1" || got[0].ClaimResources[1].ShareId != nil ||
		len(got[0].ClaimResources[1].CdiDevices) != 1 || got[0].ClaimResources[1].CdiDevices[0].Name != "d/x=2" {
		t.Fatalf("init container: %v", got)
	}
	// claim-1 is not cached: left out.
	if got := m.PodResources(pod, "c"); len(got) != 1 || got[0].ClaimName != "claim-2" {
		t.Fatalf("container: %v", got)
	}
	if got := m.PodResources(pod, "nope"); got != nil {
		t.Fatalf("unknown container: %v", got)
	}
}

package status

import (
	"slices"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The user the runtime reports of a container is its status's user.linux, as upstream's kubelet converts it.
func TestContainerStatusUser(t *testing.T) {
	pod := apiPod("1")
	c := running("app", "c1", 0, t0)
	c.User = &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{Uid: 1000, Gid: 1000, SupplementalGroups: []int64{1000, 50000, 60000}}}
	st := Compute(Input{Pod: pod, Now: t0, Sandboxes: []*runtimeapi.PodSandboxStatus{readySandbox("10.0.0.5")},
		Containers: []*runtimeapi.ContainerStatus{c}})
	u := st.ContainerStatuses[0].User
	if u == nil || u.Linux == nil || u.Linux.UID != 1000 || u.Linux.GID != 1000 || !slices.Equal(u.Linux.SupplementalGroups, []int64{1000, 50000, 60000}) {
		t.Errorf("user %+v", u)
	}
	if got := containerUser(nil); got != nil {
		t.Errorf("no user reported: %+v", got)
	}
	if got := containerUser(&runtimeapi.ContainerUser{}); got == nil || got.Linux != nil {
		t.Errorf("an empty user: %+v", got)
	}
}

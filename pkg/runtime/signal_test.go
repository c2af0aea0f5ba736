package runtime

import (
	"os"
	"testing"
)

func TestCgroupFileNames(t *testing.T) {
	const id = "5f0467832519f84d530de9c682beeb7f11cca47ce424998cccfa6d5351811772"
	tests := []struct {
		name    string
		content string
		id      string
		want    bool
	}{
		{"cgroup v1, cgroupfs", "9:name=systemd:/kubepods/besteffort/podu/" + id + "\n4:memory:/kubepods/besteffort/podu/" + id + "\n0::/kubepods/besteffort/podu/" + id + "\n", id, true},
		{"cgroup v2, cgroupfs", "0::/kubepods/burstable/podu/" + id + "\n", id, true},
		{"systemd scope", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podu.slice/nodeagent-" + id + ".scope\n", id, true},
		{"containerd's default cgroup", "0::/nodeagent/" + id + "\n", id, true},
		{"another container", "0::/kubepods/besteffort/podu/" + id[1:] + "x\n", id, false},
		{"the pod's cgroup, not the container's", "0::/kubepods/besteffort/podu\n", id, false},
		{"ID only inside the path", "0::/" + id + "/child\n", id, false},
		{"a host process", "0::/system.slice/ssh.service\n", id, false},
		{"root cgroup, empty ID", "0::/\n", "", false},
		{"not a cgroup file", "garbage", id, false},
		{"empty", "", id, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cgroupFileNames(tt.content, tt.id); got != tt.want {
				t.Errorf("cgroupFileNames(%q, %q) = %v, want %v", tt.content, tt.id, got, tt.want)
			}
		})
	}
}

// This test process is in no container's cgroup: its own cgroup file must not name one.
func TestInContainerCgroupOfThisProcess(t *testing.T) {
	if inContainerCgroup(os.Getpid(), "5f0467832519f84d530de9c682beeb7f11cca47ce424998cccfa6d5351811772") {
		t.Error("this test process is reported in a container's cgroup")
	}
}

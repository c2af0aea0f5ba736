package specopts

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/mount"
	osinterface "github.com/containerd/containerd/v2/pkg/os"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestProcessArgs(t *testing.T) {
	img := &imagespec.ImageConfig{Entrypoint: []string{"/entry"}, Cmd: []string{"cmd", "arg"}}
	noEntry := &imagespec.ImageConfig{Entrypoint: []string{""}, Cmd: []string{"sh"}}
	for _, tc := range []struct {
		name          string
		command, args []string
		img           *imagespec.ImageConfig
		want          []string
		wantErr       bool
	}{
		{name: "image entrypoint and cmd", img: img, want: []string{"/entry", "cmd", "arg"}},
		{name: "args replace the cmd only", args: []string{"x"}, img: img, want: []string{"/entry", "x"}},
		{name: "command replaces both", command: []string{"/bin/true"}, img: img, want: []string{"/bin/true"}},
		{name: "command and args", command: []string{"/bin/echo"}, args: []string{"hi"}, img: img, want: []string{"/bin/echo", "hi"}},
		{name: "empty non-nil command keeps no entrypoint", command: []string{}, img: img, want: []string{"cmd", "arg"}},
		{name: "entrypoint of one empty string is none", img: noEntry, want: []string{"sh"}},
		{name: "nothing to run", img: &imagespec.ImageConfig{}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ProcessArgs(tc.command, tc.args, tc.img)
			if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Fatalf("ProcessArgs = %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestCapabilities(t *testing.T) {
	all := []string{"CAP_CHOWN", "CAP_KILL", "CAP_NET_ADMIN"}
	for _, tc := range []struct {
		name      string
		add, drop []string
		want      []string
	}{
		{name: "add one", add: []string{"net_admin"}, want: []string{"CAP_CHOWN", "CAP_NET_ADMIN"}},
		{name: "drop one", drop: []string{"CHOWN"}, want: []string{}},
		{name: "add all drop one", add: []string{"ALL"}, drop: []string{"kill"}, want: []string{"CAP_CHOWN", "CAP_NET_ADMIN"}},
		{name: "drop all add one", add: []string{"KILL"}, drop: []string{"all"}, want: []string{"CAP_KILL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &runtimespec.Spec{Process: &runtimespec.Process{Capabilities: &runtimespec.LinuxCapabilities{Bounding: []string{"CAP_CHOWN"}, Effective: []string{"CAP_CHOWN"}, Permitted: []string{"CAP_CHOWN"}}}}
			sc := &runtimeapi.LinuxContainerSecurityContext{Capabilities: &runtimeapi.Capability{AddCapabilities: tc.add, DropCapabilities: tc.drop}}
			if err := WithCapabilities(sc, all)(context.Background(), nil, nil, s); err != nil {
				t.Fatal(err)
			}
			got := slices.Sorted(slices.Values(s.Process.Capabilities.Bounding))
			if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Fatalf("bounding = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSupplementalGroupsMerged(t *testing.T) {
	s := &runtimespec.Spec{Process: &runtimespec.Process{User: runtimespec.User{AdditionalGids: []uint32{10, 3}}}}
	if err := WithSupplementalGroups([]int64{3, 2000, 1})(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Process.User.AdditionalGids, []uint32{1, 3, 10, 2000}; !slices.Equal(got, want) {
		t.Fatalf("gids = %v, want %v", got, want)
	}
}

// fakeOS answers mount lookups with the given optional fields.
type fakeOS struct {
	osinterface.RealOS
	optional string
}

func (f fakeOS) LookupMount(string) (mount.Info, error) {
	return mount.Info{Mountpoint: "/", Optional: f.optional}, nil
}

func TestMounts(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "made", "here")
	config := &runtimeapi.ContainerConfig{Mounts: []*runtimeapi.Mount{
		{ContainerPath: "/data/deep", HostPath: dir, Readonly: true},
		{ContainerPath: "/data/rro", HostPath: dir, Readonly: true, RecursiveReadOnly: true},
		{ContainerPath: "/data/img", HostPath: dir, Readonly: true, Image: &runtimeapi.ImageSpec{Image: "sha256:1"}},
		{ContainerPath: "/data", HostPath: missing},
		{ContainerPath: "/etc/hosts", HostPath: dir, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
	}}
	extra := []*runtimeapi.Mount{{ContainerPath: "/etc/hosts/", HostPath: "/ignored"}, {ContainerPath: "/dev/shm", HostPath: dir}}
	s := &runtimespec.Spec{Mounts: []runtimespec.Mount{{Destination: "/proc"}, {Destination: "/dev/shm"}, {Destination: "/dev"}}}
	if err := WithMounts(fakeOS{optional: "master:1"}, config, extra)(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range s.Mounts {
		got = append(got, m.Destination+" "+m.Source+" "+strings.Join(m.Options, ","))
	}
	want := []string{
		"/proc  ", "/dev  ", "/sys/fs/cgroup cgroup nosuid,noexec,nodev,relatime,ro",
		"/data " + missing + " rbind,rprivate,rw",
		"/data/deep " + dir + " rbind,rprivate,ro",
		"/data/rro " + dir + " rbind,rprivate,rro",
		"/data/img " + dir + " rbind,rprivate,nosuid,nodev,ro",
		"/etc/hosts " + dir + " rbind,rslave,rw",
		"/dev/shm " + dir + " rbind,rprivate,rw",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("mounts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s.Linux.RootfsPropagation != "rslave" {
		t.Fatalf("rootfs propagation %q, want rslave", s.Linux.RootfsPropagation)
	}
}

func TestMountRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		m        *runtimeapi.Mount
		optional string
		want     string
	}{
		{name: "bidirectional on a private mount", m: &runtimeapi.Mount{ContainerPath: "/x", HostPath: dir, Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL}, optional: "master:1", want: "not a shared mount"},
		{name: "host-to-container on a private mount", m: &runtimeapi.Mount{ContainerPath: "/x", HostPath: dir, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER}, want: "not a shared or slave mount"},
		{name: "recursive read-only, not read-only", m: &runtimeapi.Mount{ContainerPath: "/x", HostPath: dir, RecursiveReadOnly: true}, want: "recursive read-only mount must be read-only"},
		{name: "recursive read-only, propagated", m: &runtimeapi.Mount{ContainerPath: "/x", HostPath: dir, Readonly: true, RecursiveReadOnly: true,
			Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER}, optional: "master:1", want: "recursive read-only mount requires private propagation"},
		{name: "ID-mapped users only", m: &runtimeapi.Mount{ContainerPath: "/x", HostPath: dir, UidMappings: []*runtimeapi.IDMapping{{HostId: 1, Length: 1}}}, want: "needs both user and group mappings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &runtimespec.Spec{}
			err := WithMounts(fakeOS{optional: tc.optional}, &runtimeapi.ContainerConfig{Mounts: []*runtimeapi.Mount{tc.m}}, nil)(context.Background(), nil, nil, s)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("error %v, want one naming %q and the host path", err, tc.want)
			}
		})
	}
}

// A pod in a user namespace sends its mappings with each mount: the bind mount is ID-mapped.
func TestIDMappedMount(t *testing.T) {
	m := []*runtimeapi.IDMapping{{HostId: 65536, Length: 65536}}
	s := &runtimespec.Spec{}
	config := &runtimeapi.ContainerConfig{Mounts: []*runtimeapi.Mount{{ContainerPath: "/x", HostPath: t.TempDir(), UidMappings: m, GidMappings: m}}}
	if err := WithMounts(fakeOS{}, config, nil)(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	want := []runtimespec.LinuxIDMapping{{HostID: 65536, Size: 65536}}
	got := s.Mounts[len(s.Mounts)-1]
	if got.Destination != "/x" || !slices.Equal(got.UIDMappings, want) || !slices.Equal(got.GIDMappings, want) {
		t.Fatalf("mount %+v, want mappings %v", got, want)
	}
}

// An image volume the runtime has not mounted on the host (no host path) or not read-only is never bound.
func TestImageMountRefusals(t *testing.T) {
	for _, m := range []*runtimeapi.Mount{
		{ContainerPath: "/img", Readonly: true, Image: &runtimeapi.ImageSpec{Image: "sha256:1"}},
		{ContainerPath: "/img", HostPath: t.TempDir(), Image: &runtimeapi.ImageSpec{Image: "sha256:1"}},
	} {
		err := WithMounts(fakeOS{}, &runtimeapi.ContainerConfig{Mounts: []*runtimeapi.Mount{m}}, nil)(context.Background(), nil, nil, &runtimespec.Spec{})
		if err == nil || !strings.Contains(err.Error(), "image volume \"sha256:1\" at \"/img\"") {
			t.Errorf("%+v: error %v", m, err)
		}
	}
}

func TestResources(t *testing.T) {
	s := &runtimespec.Spec{}
	res := &runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 50000, CpuShares: 512, MemoryLimitInBytes: 1 << 20, CpusetCpus: "0", Unified: map[string]string{"memory.high": "1000"}}
	if err := WithResources(res)(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	r := s.Linux.Resources
	if *r.CPU.Period != 100000 || *r.CPU.Quota != 50000 || *r.CPU.Shares != 512 || r.CPU.Cpus != "0" || *r.Memory.Limit != 1<<20 || r.Unified["memory.high"] != "1000" {
		t.Fatalf("resources %+v %+v %v", r.CPU, r.Memory, r.Unified)
	}
	if SwapControllerAvailable() != (r.Memory.Swap != nil) || (r.Memory.Swap != nil && *r.Memory.Swap != 1<<20) {
		t.Fatalf("swap %v with swap accounting %v: want the memory limit exactly when the host accounts swap", r.Memory.Swap, SwapControllerAvailable())
	}
}

func TestPodNamespaces(t *testing.T) {
	s := &runtimespec.Spec{Linux: &runtimespec.Linux{}}
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET}}
	if err := WithPodNamespaces(sc, 10, 20)(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ns := range s.Linux.Namespaces {
		got = append(got, string(ns.Type)+"="+ns.Path)
	}
	want := []string{"network=/proc/10/ns/net", "ipc=/proc/10/ns/ipc", "uts=/proc/10/ns/uts", "pid=/proc/20/ns/pid"}
	if !slices.Equal(got, want) {
		t.Fatalf("namespaces %q, want %q", got, want)
	}
	// A pod in a user namespace of its own: the container joins the pause container's, with the mappings.
	m := []*runtimeapi.IDMapping{{HostId: 131072, Length: 65536}}
	sc.NamespaceOptions.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: m, Gids: m}
	s = &runtimespec.Spec{}
	if err := WithPodNamespaces(sc, 10, 20)(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	last := s.Linux.Namespaces[len(s.Linux.Namespaces)-1]
	want1 := runtimespec.LinuxIDMapping{HostID: 131072, Size: 65536}
	if last.Type != runtimespec.UserNamespace || last.Path != "/proc/10/ns/user" || len(s.Linux.UIDMappings) != 1 ||
		s.Linux.UIDMappings[0] != want1 || len(s.Linux.GIDMappings) != 1 || s.Linux.GIDMappings[0] != want1 {
		t.Fatalf("user namespace %+v, mappings %v %v", last, s.Linux.UIDMappings, s.Linux.GIDMappings)
	}
	sc.NamespaceOptions.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD}
	if err := WithPodNamespaces(sc, 10, 20)(context.Background(), nil, nil, &runtimespec.Spec{}); err == nil {
		t.Fatal("a pod user namespace without mappings was accepted")
	}
}

// Hugepage limits reach the spec where the hugetlb controller is, and are left out (no error) where it is
// not: upstream's kubelet sends one per page size, zero when the pod asks for none.
func TestHugepageLimits(t *testing.T) {
	res := &runtimeapi.LinuxContainerResources{HugepageLimits: []*runtimeapi.HugepageLimit{{PageSize: "2MB", Limit: 0}}}
	saved := hugetlbAvailable
	t.Cleanup(func() { hugetlbAvailable = saved })
	for _, have := range []bool{true, false} {
		hugetlbAvailable = func() bool { return have }
		s := &runtimespec.Spec{}
		if err := WithResources(res)(context.Background(), nil, nil, s); err != nil {
			t.Fatalf("hugetlb controller %v: %v", have, err)
		}
		if got := len(s.Linux.Resources.HugepageLimits); got != map[bool]int{true: 1, false: 0}[have] {
			t.Fatalf("hugetlb controller %v: %d hugepage limits in the spec", have, got)
		}
	}
}

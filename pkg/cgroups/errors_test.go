package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

func TestDetectMode(t *testing.T) {
	for _, mode := range []Mode{ModeV1, ModeHybrid, ModeV2} {
		h := newFakeHost(t, mode)
		got, err := DetectMode(h.root)
		if err != nil || got != mode {
			t.Errorf("DetectMode(%s tree) = %s, %v", mode, got, err)
		}
	}
	if _, err := DetectMode(t.TempDir()); !errors.Is(err, ErrHostUnsupported) {
		t.Errorf("DetectMode(empty dir) = %v, want ErrHostUnsupported", err)
	}
}

func TestParseDriver(t *testing.T) {
	for in, want := range map[string]Driver{"": DriverCgroupfs, "cgroupfs": DriverCgroupfs, "systemd": DriverSystemd} {
		if got, err := ParseDriver(in); err != nil || got != want {
			t.Errorf("ParseDriver(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseDriver("Systemd"); !errors.Is(err, ErrConfig) {
		t.Errorf("ParseDriver(Systemd) = %v, want ErrConfig", err)
	}
}

// Configurations and hosts that do not fit fail in New with one error and
// leave the tree untouched.
func TestNewRejects(t *testing.T) {
	tests := []struct {
		name    string
		mode    Mode
		opts    []fakeOpt
		edit    func(*Config, *deps)
		wantErr error
		wantMsg string
	}{
		{name: "missing v1 controller", mode: ModeV1, opts: []fakeOpt{withoutController("pids")},
			wantErr: ErrHostUnsupported, wantMsg: "controller(s) pids not available"},
		{name: "missing v2 controllers", mode: ModeV2, opts: []fakeOpt{withoutController("memory"), withoutController("pids")},
			wantErr: ErrHostUnsupported, wantMsg: "controller(s) memory, pids not available"},
		{name: "no hierarchy", mode: ModeV1, edit: func(c *Config, _ *deps) { c.Root = filepath.Join(c.Root, "nothing") },
			wantErr: ErrHostUnsupported, wantMsg: "no cgroup hierarchy"},
		{name: "systemd driver without systemd", mode: ModeV1,
			edit:    func(c *Config, d *deps) { c.Driver = DriverSystemd; d.systemdRunning = func() bool { return false } },
			wantErr: ErrHostUnsupported, wantMsg: "needs systemd as PID 1"},
		{name: "systemd driver on another root", mode: ModeV2, edit: func(c *Config, _ *deps) { c.Driver = DriverSystemd },
			wantErr: ErrConfig, wantMsg: "manages only /sys/fs/cgroup"},
		{name: "unknown driver", mode: ModeV1, edit: func(c *Config, _ *deps) { c.Driver = "docker" },
			wantErr: ErrConfig, wantMsg: `cgroup driver "docker"`},
		{name: "relative cgroup root", mode: ModeV1, edit: func(c *Config, _ *deps) { c.CgroupRoot = "kubepods" },
			wantErr: ErrConfig, wantMsg: "cgroup root"},
		{name: "cgroup root is the hierarchy root", mode: ModeV1, edit: func(c *Config, _ *deps) { c.CgroupRoot = "/" },
			wantErr: ErrConfig, wantMsg: "cgroup root"},
		{name: "reservations eat all memory", mode: ModeV1, edit: func(c *Config, _ *deps) { c.SystemReserved = rl("memory=24Gi") },
			wantErr: ErrConfig, wantMsg: "leave no memory for pods"},
		{name: "negative reservation", mode: ModeV1, edit: func(c *Config, _ *deps) { c.KubeReserved = rl("cpu=-1") },
			wantErr: ErrConfig, wantMsg: "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHost(t, tt.mode, tt.opts...)
			cfg, d := h.config(DriverCgroupfs), h.deps(DriverCgroupfs)
			if tt.edit != nil {
				tt.edit(&cfg, &d)
			}
			before := h.dirs()
			_, err := newManager(cfg, d)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("newManager = %v, want %v containing %q", err, tt.wantErr, tt.wantMsg)
			}
			if after := h.dirs(); !slices.Equal(before, after) {
				t.Errorf("tree changed: %v -> %v", before, after)
			}
		})
	}
}

// A read-only hierarchy fails Start before anything is made.
func TestStartReadOnly(t *testing.T) {
	h := newFakeHost(t, ModeV1)
	d := h.deps(DriverCgroupfs)
	d.access = func(dir string) error {
		if strings.HasSuffix(dir, "/memory") {
			return syscall.EROFS
		}
		return nil
	}
	m, err := newManager(h.config(DriverCgroupfs), d)
	if err != nil {
		t.Fatal(err)
	}
	before := h.dirs()
	err = m.Start(testContext(t))
	if !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), "memory: read-only file system") {
		t.Fatalf("Start = %v, want ErrNotWritable naming the memory hierarchy", err)
	}
	if after := h.dirs(); !slices.Equal(before, after) {
		t.Errorf("tree changed: %v -> %v", before, after)
	}
}

// The real access check, on a directory the test cannot write: as root
// that takes a read-only mount, which needs CAP_SYS_ADMIN.
func TestStartReadOnlyMount(t *testing.T) {
	h := newFakeHost(t, ModeV2)
	if os.Geteuid() == 0 {
		if err := unix.Mount("tmpfs", h.root, "tmpfs", 0, ""); err != nil {
			t.Skipf("needs a tmpfs mount for a read-only tree as root: %v", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(h.root, unix.MNT_DETACH) })
		mustWrite(t, filepath.Join(h.root, "cgroup.controllers"), "cpu memory pids\n")
		if err := unix.Mount("", h.root, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			t.Skipf("remount read-only: %v", err)
		}
	} else {
		if err := os.Chmod(h.root, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(h.root, 0o755) })
	}
	d := h.deps(DriverCgroupfs)
	d.access = hostDeps().access
	m, err := newManager(h.config(DriverCgroupfs), d)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(testContext(t)); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("Start on a read-only tree = %v, want ErrNotWritable", err)
	}
	if dirExists(filepath.Join(h.root, "kubepods")) {
		t.Error("kubepods created on a read-only tree")
	}
}

// failingApplier fails to create the cgroup whose last component is
// failOn, after making its directories, as a kernel refusing a value would.
type failingApplier struct {
	fileApplier
	failOn string
}

func (a failingApplier) create(c cgroupSpec) error {
	if c.name[len(c.name)-1] == a.failOn {
		for _, dir := range c.paths {
			_ = os.MkdirAll(dir, 0o755)
		}
		return syscall.EINVAL
	}
	return a.fileApplier.create(c)
}

// A failure half-way through the tree removes what Start made, and keeps
// what was there before.
func TestStartRollsBack(t *testing.T) {
	for _, preexisting := range []bool{false, true} {
		h := newFakeHost(t, ModeV1)
		if preexisting {
			h.write("cpu", "/kubepods", "cpu.shares", "1024\n")
		}
		d := h.deps(DriverCgroupfs)
		d.newApplier = func(l layout, huge []int64) applier {
			return failingApplier{fileApplier{layout: l, hugeSizes: huge}, "besteffort"}
		}
		m, err := newManager(h.config(DriverCgroupfs), d)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(testContext(t)); err == nil || !strings.Contains(err.Error(), "besteffort") {
			t.Fatalf("Start = %v, want an error about besteffort", err)
		}
		for _, d := range h.dirs() {
			if strings.Contains(d, "burstable") || strings.Contains(d, "besteffort") {
				t.Errorf("preexisting=%v: %s left after a failed start", preexisting, d)
			}
		}
		if got := dirExists(h.dir("cpu", "/kubepods")); got != preexisting {
			t.Errorf("preexisting=%v: kubepods exists=%v after a failed start", preexisting, got)
		}
		if !preexisting && dirExists(h.dir("memory", "/kubepods")) {
			t.Errorf("kubepods left in the memory hierarchy after a failed start")
		}
	}
}

func TestEnsurePodRejects(t *testing.T) {
	tests := []struct {
		name    string
		mode    Mode
		opts    []fakeOpt
		pod     string // container requests=limits
		wantMsg string
	}{
		{"request above limit", ModeV1, nil, "", "exceeds its limit"},
		{"huge pages without hugetlb", ModeV1, nil, "cpu=1,memory=1Gi,hugepages-2Mi=2Mi",
			"hugetlb controller is not available"},
		{"huge page size the host lacks", ModeV2, nil, "cpu=1,memory=1Gi,hugepages-16Mi=16Mi",
			"huge page size 16MB is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHost(t, tt.mode, tt.opts...)
			m := h.start(DriverCgroupfs)
			pod := mkPod("x", []v1.Container{ctr("a", "cpu=2", "cpu=1")})
			if tt.pod != "" {
				pod = mkPod("x", []v1.Container{ctr("a", tt.pod, tt.pod)})
			}
			_, err := m.EnsurePod(testContext(t), pod)
			if !errors.Is(err, ErrInvalidResources) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("EnsurePod = %v, want ErrInvalidResources containing %q", err, tt.wantMsg)
			}
			if uids, _ := m.PodCgroups(); len(uids) != 0 {
				t.Errorf("pod cgroups %v made for a rejected pod", uids)
			}
		})
	}
}

func TestHugePagesOnV1(t *testing.T) {
	h := newFakeHost(t, ModeV1, withHugetlb())
	m := h.start(DriverCgroupfs)
	assertFile(t, h, "hugetlb", "/kubepods/burstable", "hugetlb.2MB.limit_in_bytes", "4611686018427387904")
	spec := "cpu=1,memory=1Gi,hugepages-2Mi=8Mi"
	if _, err := m.EnsurePod(testContext(t), mkPod("h", []v1.Container{ctr("a", spec, spec)})); err != nil {
		t.Fatal(err)
	}
	assertFile(t, h, "hugetlb", "/kubepods/podh", "hugetlb.2MB.limit_in_bytes", "8388608")
	assertFile(t, h, "hugetlb", "/kubepods/podh", "hugetlb.1GB.limit_in_bytes", "0")
}

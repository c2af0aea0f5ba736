package specopts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/oci"
	osinterface "github.com/containerd/containerd/v2/pkg/os"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/internal/kernel"
)

// WithMounts adds the container's CRI mounts and the runtime's extra ones (a CRI mount at the same path
// wins) as bind mounts, after a read-only cgroup mount and the default spec's mounts that none of them
// replaces (a /dev mount replaces everything under /dev). Mounts are ordered by depth so a parent never
// shadows a child. A missing host path is created as a directory; symlinks are resolved.
func WithMounts(osi osinterface.OS, config *runtimeapi.ContainerConfig, extra []*runtimeapi.Mount) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *runtimespec.Spec) error {
		mounts := mergeMounts(config.GetMounts(), extra)
		s.Mounts = append(s.Mounts, runtimespec.Mount{
			Source: "cgroup", Destination: "/sys/fs/cgroup", Type: "cgroup",
			Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"},
		})
		s.Mounts = keepDefaultMounts(s.Mounts, mounts)
		if s.Linux == nil {
			s.Linux = &runtimespec.Linux{}
		}
		for _, m := range mounts {
			bind, err := bindMount(osi, s.Linux, m)
			if err != nil {
				return err
			}
			s.Mounts = append(s.Mounts, bind)
		}
		return nil
	}
}

// mergeMounts is the CRI mounts plus the extra mounts whose destination no CRI mount takes, ordered by
// the depth of their destination (stable, so equal depths keep their order).
func mergeMounts(cri, extra []*runtimeapi.Mount) []*runtimeapi.Mount {
	mounts := slices.Clone(cri)
	for _, e := range extra {
		if !slices.ContainsFunc(cri, func(c *runtimeapi.Mount) bool { return sameDest(c.GetContainerPath(), e.GetContainerPath()) }) {
			mounts = append(mounts, e)
		}
	}
	slices.SortStableFunc(mounts, func(a, b *runtimeapi.Mount) int { return depth(a) - depth(b) })
	return mounts
}

func depth(m *runtimeapi.Mount) int {
	return strings.Count(filepath.Clean(m.GetContainerPath()), string(os.PathSeparator))
}

func sameDest(a, b string) bool { return filepath.Clean(a) == filepath.Clean(b) }

// keepDefaultMounts drops the default mounts a supplied mount replaces, and everything under /dev when
// /dev itself is supplied.
func keepDefaultMounts(defaults []runtimespec.Mount, supplied []*runtimeapi.Mount) []runtimespec.Mount {
	taken := map[string]bool{}
	for _, m := range supplied {
		taken[filepath.Clean(m.GetContainerPath())] = true
	}
	var out []runtimespec.Mount
	for _, m := range defaults {
		dst := filepath.Clean(m.Destination)
		if taken[dst] || (taken["/dev"] && strings.HasPrefix(dst, "/dev/")) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// bindMount is the OCI mount of one CRI mount, with its propagation checked against the host mount it
// lives on (bidirectional needs a shared one, host-to-container a shared or slave one); it may raise
// the rootfs propagation to match.
func bindMount(osi osinterface.OS, l *runtimespec.Linux, m *runtimeapi.Mount) (runtimespec.Mount, error) {
	src := m.GetHostPath()
	if m.GetImage() != nil && (src == "" || !m.GetReadonly()) {
		return runtimespec.Mount{}, fmt.Errorf("image volume %q at %q is not mounted read-only on the host", m.GetImage().GetImage(), m.GetContainerPath())
	}
	// An ID-mapped mount (a pod in a user namespace: upstream's kubelet sends the pod's mappings with each of
	// its mounts) shows the files' IDs as the same IDs inside the pod; runc makes it with mount_setattr.
	if (len(m.GetUidMappings()) > 0) != (len(m.GetGidMappings()) > 0) {
		return runtimespec.Mount{}, fmt.Errorf("an ID-mapped mount needs both user and group mappings (hostPath=%q)", src)
	}
	// A recursive read-only mount (runc's "rro": every submount read-only too, mount_setattr with
	// AT_RECURSIVE) is read-only and private, as containerd's CRI plugin requires.
	if m.GetRecursiveReadOnly() {
		if !m.GetReadonly() {
			return runtimespec.Mount{}, fmt.Errorf("recursive read-only mount must be read-only (hostPath=%q)", src)
		}
		if p := m.GetPropagation(); p != runtimeapi.MountPropagation_PROPAGATION_PRIVATE {
			return runtimespec.Mount{}, fmt.Errorf("recursive read-only mount requires private propagation, got %s (hostPath=%q)", p, src)
		}
		if !RecursiveReadOnlySupported() {
			return runtimespec.Mount{}, fmt.Errorf("recursive read-only mounts need Linux 5.12 or later (hostPath=%q)", src)
		}
	}
	if _, err := osi.Stat(src); err != nil {
		if !os.IsNotExist(err) {
			return runtimespec.Mount{}, fmt.Errorf("failed to stat %q: %w", src, err)
		}
		if err := osi.MkdirAll(src, 0o755); err != nil {
			return runtimespec.Mount{}, fmt.Errorf("failed to mkdir %q: %w", src, err)
		}
	}
	resolved, err := osi.ResolveSymbolicLink(src)
	if err != nil {
		return runtimespec.Mount{}, fmt.Errorf("failed to resolve symlink %q: %w", src, err)
	}
	options := []string{"rbind"}
	switch m.GetPropagation() {
	case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
		if err := requirePropagation(osi, resolved, "shared:"); err != nil {
			return runtimespec.Mount{}, err
		}
		options = append(options, "rshared")
		l.RootfsPropagation = "rshared"
	case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
		if err := requirePropagation(osi, resolved, "shared:", "master:"); err != nil {
			return runtimespec.Mount{}, err
		}
		options = append(options, "rslave")
		if l.RootfsPropagation != "rshared" && l.RootfsPropagation != "rslave" {
			l.RootfsPropagation = "rslave"
		}
	default: // private, runc's default root propagation
		options = append(options, "rprivate")
	}
	if m.GetImage() != nil {
		// An image volume, mounted by the runtime at HostPath: never set-user-ID programs or devices. Its
		// programs run, as on containerd's CRI plugin (and as critest v1.37.0 checks).
		options = append(options, "nosuid", "nodev")
	}
	if m.GetRecursiveReadOnly() {
		options = append(options, "rro")
	} else if m.GetReadonly() {
		options = append(options, "ro")
	} else {
		options = append(options, "rw")
	}
	return runtimespec.Mount{Source: resolved, Destination: m.GetContainerPath(), Type: "bind", Options: options,
		UIDMappings: IDMappings(m.GetUidMappings()), GIDMappings: IDMappings(m.GetGidMappings())}, nil
}

// requirePropagation checks that the mount holding path carries one of the optional fields (mountinfo's
// "shared:N", "master:N").
func requirePropagation(osi osinterface.OS, path string, fields ...string) error {
	info, err := osi.LookupMount(path)
	if err != nil {
		return err
	}
	if hasPropagation(info, fields...) {
		return nil
	}
	want := "shared"
	if len(fields) > 1 {
		want = "shared or slave"
	}
	return fmt.Errorf("path %q is mounted on %q but it is not a %s mount", path, info.Mountpoint, want)
}

func hasPropagation(info mount.Info, fields ...string) bool {
	for _, opt := range strings.Fields(info.Optional) {
		for _, f := range fields {
			if strings.HasPrefix(opt, f) {
				return true
			}
		}
	}
	return false
}

// WithDevices adds the container's devices (host symlinks resolved) with their cgroup permissions.
func WithDevices(osi osinterface.OS, config *runtimeapi.ContainerConfig) oci.SpecOpts {
	return func(ctx context.Context, client oci.Client, c *containers.Container, s *runtimespec.Spec) error {
		linuxResources(s)
		for _, d := range config.GetDevices() {
			path, err := osi.ResolveSymbolicLink(d.GetHostPath())
			if err != nil {
				return err
			}
			if err := oci.WithDevices(path, d.GetContainerPath(), d.GetPermissions())(ctx, client, c, s); err != nil {
				return err
			}
		}
		return nil
	}
}

// RecursiveReadOnlySupported says whether the kernel can make a mount recursively read-only
// (mount_setattr, Linux 5.12), which runc's "rro" option needs.
func RecursiveReadOnlySupported() bool {
	rroOnce.Do(func() { rroSupported, _ = kernel.AtLeast(5, 12) })
	return rroSupported
}

var (
	rroOnce      sync.Once
	rroSupported bool
)

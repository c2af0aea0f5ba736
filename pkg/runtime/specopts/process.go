package specopts

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DefaultSandboxCPUShares is the CPU weight of a pause container (as containerd's CRI plugin).
const DefaultSandboxCPUShares = 2

// WithProcessArgs sets the process arguments from the CRI config and the image, with Docker's rules: a
// command replaces the image's entrypoint and cmd; args alone replace the cmd only.
func WithProcessArgs(config *runtimeapi.ContainerConfig, image *imagespec.ImageConfig) oci.SpecOpts {
	return func(ctx context.Context, client oci.Client, c *containers.Container, s *runtimespec.Spec) error {
		argv, err := ProcessArgs(config.GetCommand(), config.GetArgs(), image)
		if err != nil {
			return err
		}
		return oci.WithProcessArgs(argv...)(ctx, client, c, s)
	}
}

// ProcessArgs merges a container's command and args with the image's entrypoint and cmd.
func ProcessArgs(command, args []string, image *imagespec.ImageConfig) ([]string, error) {
	if len(command) == 0 {
		if len(args) == 0 {
			args = slices.Clone(image.Cmd)
		}
		// An entrypoint of one empty string means "none" (docker build's ENTRYPOINT []).
		if command == nil && (len(image.Entrypoint) != 1 || image.Entrypoint[0] != "") {
			command = slices.Clone(image.Entrypoint)
		}
	}
	if len(command) == 0 && len(args) == 0 {
		return nil, errors.New("no command specified")
	}
	return append(slices.Clone(command), args...), nil
}

// WithoutDefaultSecuritySettings removes the seccomp and AppArmor profiles and the rlimits of the default
// spec: the CRI config says which apply.
func WithoutDefaultSecuritySettings(_ context.Context, _ oci.Client, _ *containers.Container, s *runtimespec.Spec) error {
	if s.Process == nil {
		s.Process = &runtimespec.Process{}
	}
	s.Process.ApparmorProfile = ""
	s.Process.Rlimits = nil
	if s.Linux != nil {
		s.Linux.Seccomp = nil
	}
	return nil
}

// WithCapabilities applies the security context's added and dropped capabilities. "ALL" adds (or drops)
// every capability in allCaps first, so "add ALL, drop CHOWN" means all but CAP_CHOWN.
func WithCapabilities(sc *runtimeapi.LinuxContainerSecurityContext, allCaps []string) oci.SpecOpts {
	caps := sc.GetCapabilities()
	if caps == nil {
		return noop
	}
	var opts []oci.SpecOpts
	if hasAll(caps.GetAddCapabilities()) {
		opts = append(opts, oci.WithCapabilities(allCaps))
	}
	if hasAll(caps.GetDropCapabilities()) {
		opts = append(opts, oci.WithCapabilities(nil))
	}
	opts = append(opts,
		oci.WithAddedCapabilities(capNames(caps.GetAddCapabilities())),
		oci.WithDroppedCapabilities(capNames(caps.GetDropCapabilities())))
	return oci.Compose(opts...)
}

func hasAll(caps []string) bool {
	return slices.ContainsFunc(caps, func(c string) bool { return strings.ToUpper(c) == "ALL" })
}

// capNames turns CRI capability names ("NET_ADMIN") into OCI ones ("CAP_NET_ADMIN"), leaving out "ALL".
func capNames(caps []string) []string {
	out := []string{}
	for _, c := range caps {
		if up := strings.ToUpper(c); up != "ALL" {
			out = append(out, "CAP_"+up)
		}
	}
	return out
}

// WithoutAmbientCaps clears the ambient capabilities: Kubernetes grants none.
func WithoutAmbientCaps(_ context.Context, _ oci.Client, _ *containers.Container, s *runtimespec.Spec) error {
	if s.Process == nil {
		s.Process = &runtimespec.Process{}
	}
	if s.Process.Capabilities == nil {
		s.Process.Capabilities = &runtimespec.LinuxCapabilities{}
	}
	s.Process.Capabilities.Ambient = nil
	return nil
}

// WithSupplementalGroups adds the pod's supplementary groups to the process's, sorted and without repeats.
func WithSupplementalGroups(groups []int64) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *runtimespec.Spec) error {
		if s.Process == nil {
			s.Process = &runtimespec.Process{}
		}
		gids := slices.Clone(s.Process.User.AdditionalGids)
		for _, g := range groups {
			gids = append(gids, uint32(g))
		}
		slices.Sort(gids)
		s.Process.User.AdditionalGids = slices.Compact(gids)
		return nil
	}
}

// WithPodOOMScoreAdj sets the process's oom_score_adj (already clamped by the caller to what the host allows).
func WithPodOOMScoreAdj(adj int) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *runtimespec.Spec) error {
		if s.Process == nil {
			s.Process = &runtimespec.Process{}
		}
		s.Process.OOMScoreAdj = &adj
		return nil
	}
}

func noop(context.Context, oci.Client, *containers.Container, *runtimespec.Spec) error { return nil }

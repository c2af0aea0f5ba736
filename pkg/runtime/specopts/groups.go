package specopts

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// GroupsUser is the user whose memberships in the image's /etc/group the Merge policy adds, as containerd's
// CRI plugin picks it: runAsUsername, else runAsUser, else the image's user without its group, else root.
func GroupsUser(sc *runtimeapi.LinuxContainerSecurityContext, imageUser string) string {
	switch {
	case sc.GetRunAsUsername() != "":
		return sc.GetRunAsUsername()
	case sc.GetRunAsUser() != nil:
		return strconv.FormatInt(sc.GetRunAsUser().GetValue(), 10)
	case imageUser != "":
		u, _, _ := strings.Cut(imageUser, ":")
		return u
	}
	return "0"
}

// WithSupplementalGroupsPolicy gives the process its supplementary groups by the container's
// supplementalGroupsPolicy, as containerd's CRI plugin does. It runs after the user option, which has put the
// primary gid among them. Merge (the default) adds the groups the image's /etc/group gives the user (see
// GroupsUser), then the pod's supplementalGroups and fsGroup; Strict adds the pod's only.
func WithSupplementalGroupsPolicy(sc *runtimeapi.LinuxContainerSecurityContext, imageUser string) oci.SpecOpts {
	switch p := sc.GetSupplementalGroupsPolicy(); p {
	case runtimeapi.SupplementalGroupsPolicy_Merge:
		return oci.Compose(WithImageGroups(GroupsUser(sc, imageUser)), WithSupplementalGroups(sc.GetSupplementalGroups()))
	case runtimeapi.SupplementalGroupsPolicy_Strict:
		return WithSupplementalGroups(sc.GetSupplementalGroups())
	default:
		return func(context.Context, oci.Client, *containers.Container, *runtimespec.Spec) error {
			return fmt.Errorf("supplementalGroupsPolicy %d is not supported: %w", p, errdefs.ErrInvalidArgument)
		}
	}
}

// WithImageGroups adds the groups the container's root filesystem's /etc/group lists user (a name, or a uid
// that /etc/passwd names) as a member of, keeping the groups already there; an image without the files or the
// user adds none. The root filesystem is the container's snapshot, or the spec's root path without one.
func WithImageGroups(user string) oci.SpecOpts {
	return func(ctx context.Context, client oci.Client, c *containers.Container, s *runtimespec.Spec) error {
		if s.Process == nil {
			s.Process = &runtimespec.Process{}
		}
		had := slices.Clone(s.Process.User.AdditionalGids)
		if err := oci.WithAdditionalGIDs(user)(ctx, client, c, s); err != nil {
			return fmt.Errorf("groups of user %q in the image: %w", user, err)
		}
		gids := append(s.Process.User.AdditionalGids, had...)
		slices.Sort(gids)
		s.Process.User.AdditionalGids = slices.Compact(gids)
		return nil
	}
}

package runtime

import (
	"context"
	"io"

	"github.com/containerd/containerd/api/services/tasks/v1"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
)

// containerdClient is what the runtime uses of containerd: the services of containerd's client, whose stores are
// interfaces already, and the few calls it makes of the client itself. *containerd.Client serves it (through
// clientAdapter); unit tests give the runtime a fake, so that a rollback is tested where it is written.
type containerdClient interface {
	ContainerService() containers.Store
	TaskService() tasks.TasksClient
	SnapshotService(snapshotter string) snapshots.Snapshotter
	ImageService() images.Store
	ContentStore() content.Store
	LeasesService() leases.Manager
	Subscribe(ctx context.Context, filters ...string) (<-chan *events.Envelope, <-chan error)

	NewContainer(ctx context.Context, id string, opts ...containerd.NewContainerOpts) (containerd.Container, error)
	LoadContainer(ctx context.Context, id string) (containerd.Container, error)
	WithLease(ctx context.Context, opts ...leases.Opt) (context.Context, func(context.Context) error, error)
	GetImage(ctx context.Context, ref string) (containerd.Image, error)
	Pull(ctx context.Context, ref string, opts ...containerd.RemoteOpt) (containerd.Image, error)
	Import(ctx context.Context, reader io.Reader, opts ...containerd.ImportOpt) ([]images.Image, error)
	// Image is the client's view of a stored image (containerd.NewImage), to unpack or size it.
	Image(img images.Image) containerd.Image
	IsServing(ctx context.Context) (bool, error)
	// RuntimeInfo and GetSnapshotterCapabilities tell whether pods may run in user namespaces (userns.go).
	RuntimeInfo(ctx context.Context, runtimePath string, runtimeOptions any) (*containerd.RuntimeInfo, error)
	GetSnapshotterCapabilities(ctx context.Context, snapshotterName string) ([]string, error)
	Close() error
}

// clientAdapter is containerd's client as the runtime's containerdClient.
type clientAdapter struct{ *containerd.Client }

func (a clientAdapter) Image(img images.Image) containerd.Image {
	return containerd.NewImage(a.Client, img)
}

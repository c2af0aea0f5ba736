package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/containerd/containerd"
	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/content"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CreateContainer creates a container in the sandbox, joined to the pause container's namespaces. It does
// not start it.
func (r *Runtime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (_ string, retErr error) {
	ctx = r.ns(ctx)
	name := config.GetMetadata().GetName()
	if name == "" {
		return "", fmt.Errorf("create container: metadata name is required")
	}
	sbCont, sbMeta, err := r.loadSandbox(ctx, podSandboxID)
	if err != nil {
		return "", fmt.Errorf("create container %q: %w", name, err)
	}
	podRef := sbMeta.Metadata.Namespace + "/" + sbMeta.Metadata.Name
	fail := func(step string, err error) error {
		return fmt.Errorf("create container %q of pod %s: %s: %w", name, podRef, step, err)
	}
	sbTask, err := sbCont.Task(ctx, nil)
	if err != nil {
		return "", fail("sandbox is not running", err)
	}
	image, err := r.resolveImage(ctx, config.GetImage().GetImage())
	if err != nil {
		return "", fail("image", err)
	}
	imgConfig, err := readImageConfig(ctx, image)
	if err != nil {
		return "", fail("image config", err)
	}

	id := newID()
	meta := &containerMeta{
		Metadata:    config.GetMetadata(),
		SandboxID:   sbCont.ID(),
		Labels:      config.GetLabels(),
		Annotations: config.GetAnnotations(),
		Image:       config.GetImage().GetImage(),
		ImageRef:    image.Target().Digest.String(),
		Mounts:      config.GetMounts(),
		StopSignal:  imgConfig.StopSignal,
		Stdin:       config.GetStdin(),
		StdinOnce:   config.GetStdinOnce(),
		TTY:         config.GetTty(),
		CreatedAt:   r.clock.Now().UnixNano(),
	}
	if cfgDesc, err := image.Config(ctx); err == nil {
		meta.ImageRef = cfgDesc.Digest.String()
	}
	if config.GetLogPath() != "" && sbMeta.LogDirectory != "" {
		meta.LogPath = filepath.Join(sbMeta.LogDirectory, config.GetLogPath())
	}
	if sbMeta.CgroupParent != "" {
		meta.CgroupsPath = cgroupsPath(sbMeta.CgroupParent, id)
	}

	specOpts, err := r.containerSpecOpts(id, sbTask.Pid(), sbMeta, meta, config, imgConfig)
	if err != nil {
		return "", fail("spec", err)
	}
	_, err = r.client.NewContainer(ctx, id,
		containerd.WithImage(image),
		containerd.WithSnapshotter(r.cfg.Snapshotter),
		containerd.WithNewSnapshot(id, image),
		containerd.WithRuntime("io.containerd.runc.v2", &runcoptions.Options{}),
		containerd.WithNewSpec(specOpts...),
		containerd.WithContainerLabels(map[string]string{labelKind: kindContainer, labelSandboxID: sbCont.ID(), labelPodUID: podUIDLabel(config.GetLabels(), podUIDLabel(sbMeta.Labels, sbMeta.Metadata.Uid))}),
		containerd.WithContainerExtension(extensionMeta, meta),
	)
	if err != nil {
		return "", fail("create", err)
	}
	logger(ctx).V(2).Info("Created container", "pod", podRef, "container", name, "id", id)
	return id, nil
}

func readImageConfig(ctx context.Context, image containerd.Image) (*imagespec.ImageConfig, error) {
	desc, err := image.Config(ctx)
	if err != nil {
		return nil, err
	}
	b, err := content.ReadBlob(ctx, image.ContentStore(), desc)
	if err != nil {
		return nil, err
	}
	var img imagespec.Image
	if err := json.Unmarshal(b, &img); err != nil {
		return nil, fmt.Errorf("decode image config: %w", err)
	}
	return &img.Config, nil
}

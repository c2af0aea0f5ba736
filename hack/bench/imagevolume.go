package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/internal/ociimage"
)

const imageVolumeRef = "localhost/bench-imagevol:1"

// benchImageVolume measures what an image volume (a CRI mount of an image) adds to a container's creation
// and start on each backend, beside the floor of getting that image onto the node at all: importing and
// unpacking it (what a pull costs past the network). The image holds one file of --mib MiB.
func benchImageVolume(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("imagevolume", flag.ContinueOnError)
	mib := fs.Int("mib", 100, "size of the image's one file, in MiB")
	rounds := fs.Int("rounds", 10, "pods per backend; each starts a plain container and one mounting the image")
	if err := fs.Parse(args); err != nil {
		return err
	}
	defer removePodLogDirs()
	data := make([]byte, *mib<<20)
	rand.New(rand.NewSource(1)).Read(data) // incompressible, as model weights are
	img, err := ociimage.Build(ociimage.Spec{Files: []ociimage.File{{Path: "/data/blob", Data: data}}, Config: ociimage.Config{Cmd: []string{"/none"}}})
	if err != nil {
		return err
	}
	var archive bytes.Buffer
	if err := img.WriteArchive(&archive, imageVolumeRef); err != nil {
		return err
	}
	client, err := containerd.New(containerdSock)
	if err != nil {
		return err
	}
	defer client.Close()
	builtin, plugin, err := benchBackends(ctx, nil)
	if err != nil {
		return err
	}
	defer builtin.Close()
	fmt.Printf("imagevolume_image_size: %d MiB\n", *mib)
	for _, b := range []struct {
		name, ns string
		rt       cri.RuntimeService
	}{{"builtin", "nodeagent", builtin}, {"criplugin", "k8s.io", plugin}} {
		nctx := namespaces.WithNamespace(ctx, b.ns)
		_ = client.ImageService().Delete(nctx, imageVolumeRef)
		t0 := time.Now()
		imgs, err := client.Import(nctx, bytes.NewReader(archive.Bytes()))
		if err != nil {
			return fmt.Errorf("import into %s: %w", b.ns, err)
		}
		for _, i := range imgs {
			if err := containerd.NewImage(client, i).Unpack(nctx, "overlayfs"); err != nil {
				return fmt.Errorf("unpack in %s: %w", b.ns, err)
			}
		}
		fmt.Printf("imagevolume_%s_import_unpack: %.1f ms (floor: the image onto the node)\n", b.name, ms(time.Since(t0)))
		plain, withVolume, err := imageVolumeRounds(ctx, b.rt, *rounds)
		_ = client.ImageService().Delete(nctx, imageVolumeRef)
		if err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
		fmt.Printf("imagevolume_%s_container_plain_p50: %.1f ms\n", b.name, ms(percentile(plain, 50)))
		fmt.Printf("imagevolume_%s_container_with_volume_p50: %.1f ms\n", b.name, ms(percentile(withVolume, 50)))
		fmt.Printf("imagevolume_%s_container_with_volume_p99: %.1f ms\n", b.name, ms(percentile(withVolume, 99)))
	}
	return nil
}

// imageVolumeRounds starts n pods, each with a plain container and then one mounting the image, and returns
// how long each container's creation and start took.
func imageVolumeRounds(ctx context.Context, rt cri.RuntimeService, n int) (plain, withVolume []time.Duration, err error) {
	for i := 0; i < n; i++ {
		sb := benchSandbox(1000 + i)
		id, err := rt.RunPodSandbox(ctx, sb, "")
		if err != nil {
			return nil, nil, err
		}
		defer func() {
			_ = rt.StopPodSandbox(ctx, id)
			_ = rt.RemovePodSandbox(ctx, id)
		}()
		for _, vol := range []bool{false, true} {
			cfg := &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: fmt.Sprintf("c-%v", vol)},
				Image:    &runtimeapi.ImageSpec{Image: "localhost/busybox:1.35"},
				Command:  []string{"sleep", "3600"},
				LogPath:  fmt.Sprintf("c-%v/0.log", vol),
			}
			if vol {
				cfg.Mounts = []*runtimeapi.Mount{{ContainerPath: "/models", Readonly: true, Image: &runtimeapi.ImageSpec{Image: imageVolumeRef}}}
			}
			t0 := time.Now()
			cid, err := rt.CreateContainer(ctx, id, cfg, sb)
			if err == nil {
				err = rt.StartContainer(ctx, cid)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("container (image volume %v): %w", vol, err)
			}
			if vol {
				withVolume = append(withVolume, time.Since(t0))
			} else {
				plain = append(plain, time.Since(t0))
			}
		}
	}
	return plain, withVolume, nil
}

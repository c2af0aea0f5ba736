package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/nodeagent/kubelet/pkg/csi"
	"github.com/nodeagent/kubelet/pkg/dra"
	"github.com/nodeagent/kubelet/pkg/pluginwatcher"
	"github.com/nodeagent/kubelet/pkg/volume"
)

// shareRootDir makes the root directory a shared mount, as upstream's kubelet makes it, so that what a CSI
// driver's pod mounts below it with Bidirectional propagation reaches the host. It runs first thing, before
// anything is mounted below the directory.
func shareRootDir(ctx context.Context, root string) {
	if os.Geteuid() != 0 {
		return
	}
	if bound, err := volume.EnsureShared(root); err != nil {
		klog.FromContext(ctx).Error(err, "The root directory is not a shared mount: mounts of CSI drivers' pods will not reach the host", "path", root)
	} else if bound {
		klog.FromContext(ctx).Info("Made the root directory a shared mount (bind-mounted onto itself)", "path", root)
	}
}

// newPlugins builds the CSI driver registry, the DRA manager (with the claims its checkpoint lists) and the
// plugin watcher of <root-dir>/plugins_registry, where CSI drivers (through node-driver-registrar) and DRA
// drivers register.
func (p *nodeParts) newPlugins(ctx context.Context) error {
	root := p.o.rootDir
	registry := filepath.Join(root, "plugins_registry")
	p.csi = csi.NewRegistry([]string{filepath.Join(root, "plugins"), registry}, &csi.APINodeInfo{Client: p.d.clients.pods, Node: p.d.name})
	var err error
	p.dra, err = dra.New(dra.Config{NodeName: p.d.name, RootDir: root, Client: p.d.clients.pods, Registerer: p.registry})
	if err != nil {
		return fmt.Errorf("dynamic resource allocation: %w", err)
	}
	p.plugins = pluginwatcher.New(registry, map[string]pluginwatcher.Handler{registerapi.CSIPlugin: p.csi, registerapi.DRAPlugin: p.dra})
	return nil
}

func (a volumeAPI) CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	return a.c.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{})
}

func (a volumeAPI) VolumeAttachment(ctx context.Context, name string) (*storagev1.VolumeAttachment, error) {
	return a.c.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
}

func (a volumeAPI) PatchClaimStatus(ctx context.Context, ns, name string, patch []byte) error {
	_, err := a.c.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// reportedInUse says whether the node's status lists the volume in status.volumesInUse; when it does not,
// it asks the node agent for a status update (which reads the volume manager's records) and says no, so that
// the volume's set-up is tried again after it.
func (p *nodeParts) reportedInUse(ctx context.Context, name v1.UniqueVolumeName) (bool, error) {
	node, err := p.d.clients.pods.CoreV1().Nodes().Get(ctx, p.d.name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	if slices.Contains(node.Status.VolumesInUse, name) {
		return true, nil
	}
	if a := p.agentReady.Load(); a != nil {
		a.Resync()
	}
	return false, nil
}

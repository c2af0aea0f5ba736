package csi

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/nodeagent/kubelet/pkg/kubeclient"
)

// NodeIDAnnotation maps each registered driver to its node ID on the Node, as upstream writes it.
const NodeIDAnnotation = "csi.volume.kubernetes.io/nodeid"

// APINodeInfo records drivers in the node's CSINode object (created owned by the Node) and on the Node's
// csi.volume.kubernetes.io/nodeid annotation and topology labels, as upstream's nodeinfomanager does.
type APINodeInfo struct {
	Client kubeclient.Interface
	Node   string

	mu sync.Mutex // one driver's change at a time: each reads and rewrites the same objects
}

var _ NodeInfo = (*APINodeInfo)(nil)

// AddDriver records d.
func (a *APINodeInfo) AddDriver(ctx context.Context, d *Driver) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	node, err := a.Client.CoreV1().Nodes().Get(ctx, a.Node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ids, err := nodeIDs(node.Annotations[NodeIDAnnotation])
	if err != nil {
		return err
	}
	labels := map[string]string{}
	for k, v := range d.Topology {
		if old, ok := node.Labels[k]; ok && old != v {
			return fmt.Errorf("topology label %s=%s of driver %s collides with the node's %s=%s", k, v, d.Name, k, old)
		}
		labels[k] = v
	}
	if ids[d.Name] != d.NodeID || len(labels) > 0 {
		ids[d.Name] = d.NodeID
		if err := a.patchNode(ctx, ids, labels); err != nil {
			return err
		}
	}
	keys := make([]string, 0, len(d.Topology))
	for k := range d.Topology {
		keys = append(keys, k)
	}
	entry := storagev1.CSINodeDriver{Name: d.Name, NodeID: d.NodeID, TopologyKeys: sortedStrings(keys)}
	if d.MaxVolumes > 0 {
		n := int32(min(d.MaxVolumes, 1<<31-1))
		entry.Allocatable = &storagev1.VolumeNodeResources{Count: &n}
	}
	return a.updateCSINode(ctx, node.UID, func(drivers []storagev1.CSINodeDriver) []storagev1.CSINodeDriver {
		return append(without(drivers, d.Name), entry)
	})
}

// RemoveDriver removes the driver called name from the CSINode object and the Node's annotation.
func (a *APINodeInfo) RemoveDriver(ctx context.Context, name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	err := a.updateCSINode(ctx, "", func(drivers []storagev1.CSINodeDriver) []storagev1.CSINodeDriver {
		return without(drivers, name)
	})
	if err != nil {
		return err
	}
	node, err := a.Client.CoreV1().Nodes().Get(ctx, a.Node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ids, err := nodeIDs(node.Annotations[NodeIDAnnotation])
	if err != nil || ids[name] == "" {
		return err
	}
	delete(ids, name)
	return a.patchNode(ctx, ids, nil)
}

// patchNode writes the annotation (removed when ids is empty) and adds labels.
func (a *APINodeInfo) patchNode(ctx context.Context, ids map[string]string, labels map[string]string) error {
	var annotation any
	if len(ids) > 0 {
		b, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		annotation = string(b)
	}
	meta := map[string]any{"annotations": map[string]any{NodeIDAnnotation: annotation}}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	_, err = a.Client.CoreV1().Nodes().Patch(ctx, a.Node, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// updateCSINode applies change to the CSINode's drivers, creating the object (owned by the Node whose UID
// is nodeUID) when it does not exist and change adds a driver.
func (a *APINodeInfo) updateCSINode(ctx context.Context, nodeUID types.UID, change func([]storagev1.CSINodeDriver) []storagev1.CSINodeDriver) error {
	client := a.Client.StorageV1().CSINodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := client.Get(ctx, a.Node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			drivers := change(nil)
			if len(drivers) == 0 {
				return nil
			}
			obj := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: a.Node}, Spec: storagev1.CSINodeSpec{Drivers: drivers}}
			if nodeUID != "" {
				obj.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: a.Node, UID: nodeUID}}
			}
			_, err = client.Create(ctx, obj, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(storagev1.Resource("csinodes"), a.Node, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		cur.Spec.Drivers = change(cur.Spec.Drivers)
		_, err = client.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func nodeIDs(annotation string) (map[string]string, error) {
	ids := map[string]string{}
	if annotation == "" {
		return ids, nil
	}
	if err := json.Unmarshal([]byte(annotation), &ids); err != nil {
		return nil, fmt.Errorf("the node's %s annotation does not parse: %w", NodeIDAnnotation, err)
	}
	return ids, nil
}

func without(drivers []storagev1.CSINodeDriver, name string) []storagev1.CSINodeDriver {
	out := make([]storagev1.CSINodeDriver, 0, len(drivers))
	for _, d := range drivers {
		if d.Name != name {
			out = append(out, d)
		}
	}
	return out
}

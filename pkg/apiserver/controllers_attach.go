package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// claimVolumeJSON is in the stored JSON of a pod with a
// persistentVolumeClaim volume.
var claimVolumeJSON = []byte(`"persistentVolumeClaim":`)

// syncAttachments does the VolumeAttachment part of kube-controller-manager's
// attach/detach controller with its csi attacher, level-triggered: from the
// pods, claims, volumes, CSIDrivers and nodes it computes the attachments
// there should be (desiredAttachments), creates the missing ones and deletes
// those no pod needs any more once their node no longer lists the volume in
// use (attachmentsToDelete). It never writes status: the driver's
// external-attacher attaches and sets status.attached. Errors are retried on
// the next pass.
func (c *controller) syncAttachments(ctx context.Context) error {
	podObjs := c.s.store.Select("pods/", func(o *storage.Object) bool {
		return o.Fields["spec.nodeName"] != "" &&
			(bytes.Contains(o.Raw, claimVolumeJSON) || bytes.Contains(o.Raw, ephemeralVolumeJSON))
	})
	vaObjs, _ := c.s.store.List("volumeattachments/")
	if len(podObjs) == 0 && len(vaObjs) == 0 {
		c.attached = nil // none left to remember
		return nil
	}
	w := c.attachWorld(podObjs, vaObjs)
	c.rememberAttachments(w)
	desired := desiredAttachments(w)
	names := make([]string, 0, len(desired))
	for name := range desired {
		if w.attachments[name] == nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	vas := c.client.StorageV1().VolumeAttachments()
	var firstErr error
	for _, name := range names {
		a := desired[name]
		_, err := vas.Create(ctx, a.object(), metav1.CreateOptions{})
		switch {
		case err == nil:
			c.attached[name] = true
		case !apierrors.IsAlreadyExists(err) && firstErr == nil:
			firstErr = fmt.Errorf("attach volume %s to node %s: %w", a.volume, a.node, err)
		}
	}
	for _, name := range attachmentsToDelete(w, desired) {
		uid := w.attachments[name].UID
		err := vas.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && firstErr == nil {
			firstErr = fmt.Errorf("detach: delete volumeattachment %s: %w", name, err)
		}
	}
	return firstErr
}

// rememberAttachments keeps c.attached, the attachments known to be the
// controller's own (see ownAttachment), up to date with w: those gone are
// forgotten, those now seen to be its own are added; w.known is the result.
func (c *controller) rememberAttachments(w *attachWorld) {
	if c.attached == nil {
		c.attached = map[string]bool{}
	}
	for name := range c.attached {
		if w.attachments[name] == nil {
			delete(c.attached, name)
		}
	}
	w.known = c.attached
	for name, va := range w.attachments {
		if ownAttachment(w, va) {
			c.attached[name] = true
		}
	}
}

// attachWorld reads what the attach/detach decisions need from the store:
// the given pods and attachments, and every claim, volume, CSIDriver and node.
func (c *controller) attachWorld(podObjs, vaObjs []*storage.Object) *attachWorld {
	w := &attachWorld{pods: decodeAll[corev1.Pod](c.s, podObjs), nodes: c.nodes(),
		claims: map[string]*corev1.PersistentVolumeClaim{}, volumes: map[string]*corev1.PersistentVolume{},
		drivers: map[string]*storagev1.CSIDriver{}, attachments: map[string]*storagev1.VolumeAttachment{}}
	list := func(prefix string) []*storage.Object {
		objs, _ := c.s.store.List(prefix)
		return objs
	}
	for _, pvc := range decodeAll[corev1.PersistentVolumeClaim](c.s, list("persistentvolumeclaims/")) {
		w.claims[pvc.Namespace+"/"+pvc.Name] = pvc
	}
	for _, pv := range decodeAll[corev1.PersistentVolume](c.s, list("persistentvolumes/")) {
		w.volumes[pv.Name] = pv
	}
	for _, d := range decodeAll[storagev1.CSIDriver](c.s, list("csidrivers/")) {
		w.drivers[d.Name] = d
	}
	for _, va := range decodeAll[storagev1.VolumeAttachment](c.s, vaObjs) {
		w.attachments[va.Name] = va
	}
	return w
}

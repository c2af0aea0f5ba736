package apiserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// ephemeralVolumeJSON is in the stored JSON of a pod with a generic
// ephemeral volume (and, rarely, of one with a label of that name).
var ephemeralVolumeJSON = []byte(`"ephemeral":`)

// ephemeralEventComponent is the source upstream's ephemeral volume
// controller records its events under.
const ephemeralEventComponent = "ephemeral_volume"

// createEphemeralClaims does what kube-controller-manager's ephemeral volume
// controller does: every pod not being deleted gets, for each of its generic
// ephemeral volumes, the claim its template describes (see ephemeralClaims),
// created through the API. A claim of that name the pod does not own is left
// alone and the pod gets upstream's FailedBinding warning, once per message.
// It is also what makes a deleted claim come back while its pod lives;
// deleting the claims with their pod is the garbage collector's part.
func (c *controller) createEphemeralClaims(ctx context.Context) error {
	objs := c.s.store.Select("pods/", func(o *storage.Object) bool {
		return bytes.Contains(o.Raw, ephemeralVolumeJSON) && !bytes.Contains(o.Raw, deletionTimestampJSON)
	})
	var firstErr error
	for _, pod := range decodeAll[corev1.Pod](c.s, objs) {
		if err := c.syncEphemeralClaims(ctx, pod); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// syncEphemeralClaims creates the missing claims of one pod, stopping at the
// first volume that fails, as upstream's syncHandler does.
func (c *controller) syncEphemeralClaims(ctx context.Context, pod *corev1.Pod) error {
	objs := objectIndex{store: c.s.store, codec: c.s.reg.Codec()}
	claims := map[string]*corev1.PersistentVolumeClaim{}
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Ephemeral == nil {
			continue
		}
		name := ephemeralClaimName(pod, &pod.Spec.Volumes[i])
		if pvc, err := getObject[corev1.PersistentVolumeClaim](objs, "persistentvolumeclaims", pod.Namespace, name); err == nil {
			claims[name] = pvc
		}
	}
	create, conflict := ephemeralClaims(pod, claims)
	for _, pvc := range create {
		_, err := c.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Create(ctx, pvc, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) { // a claim made meanwhile is judged on the next pass
			continue
		}
		if ctx.Err() != nil {
			return err
		}
		vol := strings.TrimPrefix(pvc.Name, pod.Name+"-")
		conflict = &volumeError{volume: vol, err: fmt.Errorf("create PVC %s: %w", pvc.Name, err)}
		break
	}
	if conflict == nil {
		return nil
	}
	if err := c.warnPod(ctx, pod, ephemeralEventComponent, "FailedBinding", conflict.message()); err != nil {
		return err
	}
	return fmt.Errorf("pod %s/%s, ephemeral volume %s: %w", pod.Namespace, pod.Name, conflict.volume, conflict.err)
}

// warnPod records a Warning event about pod from a controller (component).
// The event's name is made of the pod's UID, reason and message, so that a
// condition a later pass finds again is not recorded again.
func (c *controller) warnPod(ctx context.Context, pod *corev1.Pod, component, reason, msg string) error {
	sum := sha256.Sum256([]byte(string(pod.UID) + "/" + reason + "/" + msg))
	now := metav1.NewTime(c.s.cfg.Clock.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name + "." + hex.EncodeToString(sum[:8]), Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID, ResourceVersion: pod.ResourceVersion},
		Reason: reason, Message: msg, Type: corev1.EventTypeWarning, Count: 1,
		Source:         corev1.EventSource{Component: component},
		FirstTimestamp: now, LastTimestamp: now, ReportingController: component,
	}
	_, err := c.client.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("record event on pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

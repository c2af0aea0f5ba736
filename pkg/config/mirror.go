package config

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/pkg/kubeclient"
	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// MirrorClient creates and deletes mirror pods: API copies of static pods, marked with the
// kubernetes.io/config.mirror annotation and owned by the node, that show the static pod in the API.
type MirrorClient struct {
	client   kubeclient.Interface
	nodeName string
}

// NewMirrorClient returns a MirrorClient for node nodeName.
func NewMirrorClient(client kubeclient.Interface, nodeName string) *MirrorClient {
	return &MirrorClient{client: client, nodeName: nodeName}
}

// CreateMirror creates the mirror pod of a static pod.
func (m *MirrorClient) CreateMirror(ctx context.Context, static *v1.Pod) error {
	hash, ok := static.Annotations[podfacts.AnnotationConfigHash]
	if !ok {
		return fmt.Errorf("static pod %s/%s has no %s annotation", static.Namespace, static.Name, podfacts.AnnotationConfigHash)
	}
	mirror := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: static.Name, Namespace: static.Namespace,
			Labels: static.Labels, Annotations: map[string]string{},
		},
		Spec: *static.Spec.DeepCopy(),
	}
	for k, v := range static.Annotations {
		mirror.Annotations[k] = v
	}
	mirror.Annotations[podfacts.AnnotationConfigMirror] = hash
	mirror.Spec.NodeName = m.nodeName
	if node, err := m.client.CoreV1().Nodes().Get(ctx, m.nodeName, metav1.GetOptions{}); err == nil {
		controller := true
		mirror.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: &controller,
		}}
	}
	if _, err := m.client.CoreV1().Pods(static.Namespace).Create(ctx, mirror, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create mirror pod: %w", err)
	}
	return nil
}

// DeleteMirror deletes a mirror pod at once (it has nothing to stop), if it still has uid.
func (m *MirrorClient) DeleteMirror(ctx context.Context, namespace, name string, uid types.UID) error {
	zero := int64(0)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := m.client.CoreV1().Pods(namespace).Delete(ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete mirror pod: %w", err)
	}
	return nil
}

package node

import (
	"context"
	"fmt"
	"runtime"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// The beta OS and architecture labels upstream's kubelet still sets.
const (
	betaLabelOS   = "beta.kubernetes.io/os"
	betaLabelArch = "beta.kubernetes.io/arch"
)

// Registration backoff, upstream's: 100ms doubling to 7s.
const (
	registerBackoffInitial = 100 * time.Millisecond
	registerBackoffMax     = 7 * time.Second
)

// defaultLabels are the labels every node carries: hostname, OS and architecture.
func defaultLabels(hostname string) map[string]string {
	return map[string]string{
		v1.LabelHostname:   hostname,
		v1.LabelOSStable:   runtime.GOOS,
		v1.LabelArchStable: runtime.GOARCH,
		betaLabelOS:        runtime.GOOS,
		betaLabelArch:      runtime.GOARCH,
	}
}

// annotationControllerManagedAttachDetach tells kube-controller-manager's attach/detach controller that it
// attaches and detaches this node's volumes (creates the VolumeAttachments of CSI volumes that need
// attaching), as upstream's kubelet says with its default --enable-controller-attach-detach: the kubelet
// itself only waits for the attachments.
const annotationControllerManagedAttachDetach = "volumes.kubernetes.io/controller-managed-attach-detach"

// newNode is the Node to create, without its status: the default labels overlaid with --node-labels,
// --register-with-taints, and the controller-managed attach/detach annotation. It is pure.
func newNode(name, hostname string, labels map[string]string, taints []v1.Taint) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: defaultLabels(hostname),
		Annotations: map[string]string{annotationControllerManagedAttachDetach: "true"}}}
	for k, v := range labels {
		n.Labels[k] = v
	}
	if len(taints) > 0 {
		n.Spec.Taints = append([]v1.Taint(nil), taints...)
	}
	return n
}

// register creates (or finds) the Node, retrying with backoff until it succeeds or ctx ends.
func (a *Agent) register(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	delay := registerBackoffInitial
	for attempt := 1; ; attempt++ {
		err := a.tryRegister(ctx)
		if err == nil {
			return nil
		}
		a.apiFailed()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		logger.Error(err, "Unable to register node with API server, will retry", "node", a.cfg.Name,
			"attempt", attempt, "retryIn", delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.cfg.Clock.After(delay):
		}
		delay = min(2*delay, registerBackoffMax)
	}
}

// tryRegister makes one attempt: create the Node with its full status; if it exists already (or creating
// is forbidden, or NoRegister), read it and bring its default labels back. The status is posted by the
// status loop.
func (a *Agent) tryRegister(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	nodes := a.cfg.Client.CoreV1().Nodes()
	var createErr error
	if !a.cfg.NoRegister {
		n := newNode(a.cfg.Name, a.cfg.Hostname, a.cfg.Labels, a.cfg.Taints)
		events := a.fillStatus(ctx, n)
		logger.Info("Attempting to register node", "node", a.cfg.Name)
		cctx, cancel := context.WithTimeout(ctx, apiTimeout)
		created, err := nodes.Create(cctx, n, metav1.CreateOptions{})
		cancel()
		switch {
		case err == nil:
			logger.Info("Successfully registered node", "node", a.cfg.Name)
			a.posted(created, true)
			a.markRegistered(created.UID)
			a.record(ctx, events)
			return nil
		case apierrors.IsAlreadyExists(err):
		case apierrors.IsForbidden(err):
			createErr = err // the Node may still exist: read it
		default:
			return fmt.Errorf("create node %q: %w", a.cfg.Name, err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	existing, err := nodes.Get(cctx, a.cfg.Name, metav1.GetOptions{})
	if err != nil && createErr != nil {
		return fmt.Errorf("create node %q: %v; get it: %w", a.cfg.Name, createErr, err)
	}
	if err != nil {
		return fmt.Errorf("get existing node %q: %w", a.cfg.Name, err)
	}
	logger.Info("Node was previously registered", "node", a.cfg.Name)
	fix, annotate := missingDefaultLabels(existing, defaultLabels(a.cfg.Hostname)), existing.Annotations[annotationControllerManagedAttachDetach] != "true"
	if len(fix) > 0 || annotate {
		var annotations map[string]string
		if annotate { // a Node registered before the kubelet said so, or by another kubelet
			annotations = map[string]string{annotationControllerManagedAttachDetach: "true"}
		}
		if existing, err = a.patchMetadata(cctx, fix, annotations); err != nil {
			return err
		}
	}
	a.posted(existing, false)
	a.markRegistered(existing.UID)
	return nil
}

// patchMetadata sets labels and annotations on the Node (a merge patch of the object: label changes through
// nodes/status are not kept by every API server).
func (a *Agent) patchMetadata(ctx context.Context, labels, annotations map[string]string) (*v1.Node, error) {
	patch, err := metadataPatch(labels, annotations)
	if err != nil {
		return nil, err
	}
	n, err := a.cfg.Client.CoreV1().Nodes().Patch(ctx, a.cfg.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("patch the metadata of node %q: %w", a.cfg.Name, err)
	}
	return n, nil
}

func (a *Agent) markRegistered(uid types.UID) {
	a.mu.Lock()
	a.uid = uid
	a.mu.Unlock()
	a.registeredOnce.Do(func() { close(a.registered) })
}

func (a *Agent) nodeUID() types.UID {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.uid
}

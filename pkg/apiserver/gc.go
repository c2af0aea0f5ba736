package apiserver

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// ownerState is what the collector finds behind one owner reference.
type ownerState int

const (
	// ownerSolid exists with the referenced uid, or is of a kind not served
	// here (which the collector cannot judge, so it keeps the dependent).
	ownerSolid ownerState = iota
	// ownerAbsent is missing, or another object now has its name.
	ownerAbsent
	// ownerWaiting is being deleted in the foreground: it waits for its
	// dependents to go.
	ownerWaiting
)

// gcAction is what the collector does with one dependent: nothing, drop some
// owner references (Remove, by owner uid), or delete it (Delete set, with that
// propagation policy).
type gcAction struct {
	Remove []types.UID
	Delete *metav1.DeletionPropagation
}

// decideDependent is upstream's attemptToDeleteItem for a dependent that is
// not being deleted: states[i] is the state of refs[i]. A dependent with a
// solid owner stays and loses its references to absent and waiting owners;
// one whose owners are all absent or waiting is deleted, in the foreground
// when a waiting owner needs it and it has dependents of its own, otherwise as
// its own finalizers say (background by default).
func decideDependent(refs []metav1.OwnerReference, states []ownerState, hasDependents bool, finalizers []string) gcAction {
	var solid, waiting int
	var remove []types.UID
	for i, st := range states {
		switch st {
		case ownerSolid:
			solid++
		case ownerWaiting:
			waiting++
			remove = append(remove, refs[i].UID)
		case ownerAbsent:
			remove = append(remove, refs[i].UID)
		}
	}
	if len(refs) == 0 {
		return gcAction{}
	}
	if solid > 0 {
		return gcAction{Remove: remove}
	}
	policy := metav1.DeletePropagationBackground
	switch {
	case waiting > 0 && hasDependents:
		policy = metav1.DeletePropagationForeground
	case hasString(finalizers, metav1.FinalizerOrphanDependents):
		policy = metav1.DeletePropagationOrphan
	case hasString(finalizers, metav1.FinalizerDeleteDependents):
		policy = metav1.DeletePropagationForeground
	}
	return gcAction{Delete: &policy}
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// collectGarbage visits the keys the graph marked: owners being deleted with
// a collector finalizer, and dependents whose owners may be gone. It acts
// through the API, so pods go gracefully through their node. Keys whose
// visit fails are visited again on the next periodic pass.
func (c *controller) collectGarbage(ctx context.Context) error {
	var firstErr error
	for _, key := range c.graph.take() {
		var err error
		if c.graph.finalizing[key] {
			err = c.visitOwner(ctx, key)
		}
		if err == nil && len(c.graph.owners[key]) > 0 {
			err = c.visitDependent(ctx, key)
		}
		if err != nil && ctx.Err() == nil {
			c.graph.retry[key] = true
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	return firstErr
}

// visitOwner finishes what an owner's collector finalizer asks: orphan takes
// the owner's references off its dependents, foregroundDeletion waits until
// no dependent blocks the owner's deletion; then the finalizer goes.
func (c *controller) visitOwner(ctx context.Context, key string) error {
	o, ok := c.s.store.Get(key)
	if !ok {
		return nil
	}
	m, err := parseMeta(o.Raw)
	if err != nil || !m.deletingWithGC() {
		return err
	}
	uid := types.UID(m.Metadata.UID)
	finalizer := metav1.FinalizerDeleteDependents
	if m.hasFinalizer(metav1.FinalizerOrphanDependents) {
		finalizer = metav1.FinalizerOrphanDependents
	}
	for depKey := range c.graph.dependents[key] {
		d, ok := c.s.store.Get(depKey)
		if !ok {
			continue
		}
		dm, err := parseMeta(d.Raw)
		if err != nil {
			continue
		}
		for _, ref := range dm.Metadata.OwnerReferences {
			if ref.UID != uid {
				continue
			}
			if finalizer == metav1.FinalizerOrphanDependents {
				if err := c.removeOwnerRefs(ctx, depKey, dm, []types.UID{uid}); err != nil {
					return err
				}
				break
			}
			if ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
				return nil // still blocking: its deletion brings us back here
			}
		}
	}
	var keep []string
	for _, f := range m.Metadata.Finalizers {
		if f != finalizer {
			keep = append(keep, f)
		}
	}
	return c.patchMeta(ctx, key, m.Metadata.ResourceVersion, "finalizers", keep)
}

// visitDependent deletes a dependent whose owners are all gone (or waiting for
// it), or drops its references to gone owners while a solid one remains.
func (c *controller) visitDependent(ctx context.Context, key string) error {
	o, ok := c.s.store.Get(key)
	if !ok {
		return nil
	}
	m, err := parseMeta(o.Raw)
	if err != nil || m.Metadata.DeletionTimestamp != nil {
		return err
	}
	refs := m.Metadata.OwnerReferences
	states := make([]ownerState, len(refs))
	for i, ref := range refs {
		states[i] = c.ownerStateOf(namespaceOfKey(key), ref)
	}
	act := decideDependent(refs, states, len(c.graph.dependents[key]) > 0, m.Metadata.Finalizers)
	switch {
	case act.Delete != nil:
		uid := types.UID(m.Metadata.UID)
		return c.deleteKey(ctx, key, &metav1.DeleteOptions{PropagationPolicy: act.Delete,
			Preconditions: &metav1.Preconditions{UID: &uid}})
	case len(act.Remove) > 0:
		return c.removeOwnerRefs(ctx, key, m, act.Remove)
	}
	return nil
}

func (c *controller) ownerStateOf(ns string, ref metav1.OwnerReference) ownerState {
	key, ok := c.graph.ownerKey(ns, ref)
	if !ok {
		return ownerSolid
	}
	o, ok := c.s.store.Get(key)
	if !ok {
		return ownerAbsent
	}
	m, err := parseMeta(o.Raw)
	switch {
	case err != nil:
		return ownerSolid
	case types.UID(m.Metadata.UID) != ref.UID:
		return ownerAbsent
	case m.Metadata.DeletionTimestamp != nil && m.hasFinalizer(metav1.FinalizerDeleteDependents):
		return ownerWaiting
	}
	return ownerSolid
}

// removeOwnerRefs drops the references to the owners with the given uids.
func (c *controller) removeOwnerRefs(ctx context.Context, key string, m *objMeta, uids []types.UID) error {
	var keep []metav1.OwnerReference
	for _, ref := range m.Metadata.OwnerReferences {
		drop := false
		for _, u := range uids {
			drop = drop || ref.UID == u
		}
		if !drop {
			keep = append(keep, ref)
		}
	}
	if len(keep) == len(m.Metadata.OwnerReferences) {
		return nil
	}
	return c.patchMeta(ctx, key, m.Metadata.ResourceVersion, "ownerReferences", keep)
}

// patchMeta sets one metadata field of the object at key by a JSON merge
// patch, conditional on its resourceVersion. A missing object is no error.
func (c *controller) patchMeta(ctx context.Context, key, rv, field string, value any) error {
	res, ok := c.s.reg.ForStorage(storage.ResourceOf(key))
	if !ok {
		return fmt.Errorf("no resource for %s", key)
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{field: value, "resourceVersion": rv}})
	if err != nil {
		return err
	}
	// A cluster-scoped object is named without a namespace (client-go refuses an empty one).
	err = c.client.CoreV1().RESTClient().Patch(types.MergePatchType).AbsPath(apiPath(res.Group, res.Version)).
		NamespaceIfScoped(namespaceOfKey(key), res.Namespaced).Resource(res.Name).Name(nameOfKey(key)).
		Body(body).Do(ctx).Error()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch %s of %s: %w", field, key, err)
	}
	return nil
}

// deleteKey deletes the object at key through the API. A missing object, or
// one replaced since (a failed uid precondition), is no error.
func (c *controller) deleteKey(ctx context.Context, key string, opts *metav1.DeleteOptions) error {
	res, ok := c.s.reg.ForStorage(storage.ResourceOf(key))
	if !ok {
		return fmt.Errorf("no resource for %s", key)
	}
	err := c.client.CoreV1().RESTClient().Delete().AbsPath(apiPath(res.Group, res.Version)).
		NamespaceIfScoped(namespaceOfKey(key), res.Namespaced).Resource(res.Name).Name(nameOfKey(key)).
		Body(opts).Do(ctx).Error()
	if err != nil && !apierrors.IsNotFound(err) && !(opts.Preconditions != nil && apierrors.IsConflict(err)) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

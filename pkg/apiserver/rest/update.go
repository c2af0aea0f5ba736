package rest

import (
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
)

// update serves PUT and PATCH of an object, its status or its finalizers.
func (q *req) update() {
	data, err := readBody(q.r)
	if err != nil {
		q.fail(err)
		return
	}
	var (
		put       runtime.Object
		warnings  []string
		patchType types.PatchType
		apply     *applyRequest
	)
	if q.info.Verb == "patch" {
		if patchType, err = parsePatchType(q.r.Header.Get("Content-Type")); err != nil {
			q.fail(err)
			return
		}
		if patchType == types.ApplyYAMLPatchType {
			if apply, err = q.parseApply(data); err != nil {
				q.fail(err)
				return
			}
		}
	} else {
		served, w, err := decodeBody(q.r, q.res, data)
		if err != nil {
			q.fail(err)
			return
		}
		if put, err = q.toStorage(served); err != nil {
			q.fail(err)
			return
		}
		warnings = w
	}
	ctx := q.r.Context()
	created := false
	defer q.serialize()()
	o, typed, err := q.write(q.key(), func(cur runtime.Object) (runtime.Object, error) {
		created = false
		if cur == nil {
			creatable := put != nil && q.res.AllowCreateOnUpdate || apply != nil
			if !creatable || q.info.Subresource != "" {
				return nil, apierrors.NewNotFound(q.res.GroupResource(), q.info.Name)
			}
			var obj runtime.Object
			if apply != nil {
				var err error
				if obj, err = q.applyTo(q.newForApply(), apply); err != nil {
					return nil, err
				}
			} else {
				obj = put.DeepCopyObject()
			}
			if err := q.prepareCreate(obj); err != nil {
				return nil, err
			}
			created = true
			return obj, q.admit(ctx, obj, nil)
		}
		var obj runtime.Object
		switch {
		case put != nil:
			obj = put.DeepCopyObject()
		case apply != nil:
			if obj, err = q.applyTo(cur.DeepCopyObject(), apply); err != nil {
				return nil, err
			}
		default:
			var w []string
			if obj, w, err = q.applyPatch(cur, patchType, data); err != nil {
				return nil, err
			}
			warnings = w
		}
		return q.nextState(cur, obj, apply != nil)
	})
	if err != nil {
		q.fail(err)
		return
	}
	addWarnings(q.w, warnings)
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	q.writeObject(code, o, typed)
}

// nextState computes the stored state after an update of cur to obj. applied
// says obj comes from a server-side apply and carries its managedFields.
func (q *req) nextState(cur, obj runtime.Object, applied bool) (runtime.Object, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	old := cur.DeepCopyObject()
	oldAcc, _ := meta.Accessor(old)
	name := q.info.Name
	if acc.GetName() != name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", acc.GetName(), name))
	}
	if q.res.Namespaced && acc.GetNamespace() != "" && acc.GetNamespace() != q.info.Namespace {
		return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if rv := acc.GetResourceVersion(); rv != "" && rv != oldAcc.GetResourceVersion() {
		return nil, apierrors.NewConflict(q.res.GroupResource(), name, fmt.Errorf(
			"the object has been modified; please apply your changes to the latest version and try again"))
	}
	if uid := acc.GetUID(); uid != "" && uid != oldAcc.GetUID() {
		return nil, apierrors.NewConflict(q.res.GroupResource(), name, fmt.Errorf(
			"Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, oldAcc.GetUID()))
	}
	var next runtime.Object
	switch q.info.Subresource {
	case "status":
		ss, ok := q.res.Strategy.(registry.StatusStrategy)
		if !ok {
			return nil, apierrors.NewNotFound(q.res.GroupResource(), name)
		}
		next = cur
		ss.CopyStatus(next, obj)
		if errs := ss.ValidateStatusUpdate(next, old); len(errs) > 0 {
			return nil, q.invalid(name, errs)
		}
		if applied {
			nextAcc, _ := meta.Accessor(next)
			nextAcc.SetManagedFields(acc.GetManagedFields())
		} else {
			q.trackFields(old, next)
		}
	case "resize":
		rs, ok := q.res.Strategy.(registry.ResizeStrategy)
		if !ok {
			return nil, apierrors.NewNotFound(q.res.GroupResource(), name)
		}
		next = rs.PrepareForResize(obj, old)
		if errs := rs.ValidateResize(next, old); len(errs) > 0 {
			return nil, q.invalid(name, errs)
		}
		if !applied {
			q.trackFields(old, next)
		}
	case "ephemeralcontainers":
		es, ok := q.res.Strategy.(registry.EphemeralContainersStrategy)
		if !ok {
			return nil, apierrors.NewNotFound(q.res.GroupResource(), name)
		}
		next = es.PrepareForEphemeralContainers(obj, old)
		if errs := es.ValidateEphemeralContainersUpdate(next, old); len(errs) > 0 {
			return nil, q.invalid(name, errs)
		}
		if !applied {
			q.trackFields(old, next)
		}
	case "finalize":
		ns, ok := cur.(*corev1.Namespace)
		if !ok {
			return nil, apierrors.NewNotFound(q.res.GroupResource(), name)
		}
		ns.Spec.Finalizers = obj.(*corev1.Namespace).Spec.Finalizers
		next = ns
	default:
		acc.SetNamespace(oldAcc.GetNamespace())
		acc.SetUID(oldAcc.GetUID())
		acc.SetCreationTimestamp(oldAcc.GetCreationTimestamp())
		acc.SetDeletionTimestamp(oldAcc.GetDeletionTimestamp())
		acc.SetDeletionGracePeriodSeconds(oldAcc.GetDeletionGracePeriodSeconds())
		acc.SetGeneration(oldAcc.GetGeneration())
		acc.SetSelfLink("")
		if oldAcc.GetDeletionTimestamp() != nil {
			if errs := apivalidation.ValidateNoNewFinalizers(acc.GetFinalizers(), oldAcc.GetFinalizers(),
				field.NewPath("metadata", "finalizers")); len(errs) > 0 {
				return nil, q.invalid(name, errs)
			}
		}
		q.res.Strategy.PrepareForUpdate(obj, old)
		if err := q.mutate(obj, old); err != nil {
			return nil, err
		}
		if errs := q.res.Strategy.ValidateUpdate(obj, old); len(errs) > 0 {
			return nil, q.invalid(name, errs)
		}
		if !applied {
			q.trackFields(old, obj)
		}
		next = obj
	}
	nextAcc, _ := meta.Accessor(next)
	nextAcc.SetResourceVersion(oldAcc.GetResourceVersion())
	if err := q.admit(q.r.Context(), next, old); err != nil {
		return nil, err
	}
	if finalized(nextAcc) {
		return nil, nil
	}
	return next, nil
}

// finalized reports whether a deleting object has nothing left to wait for:
// no finalizers (a namespace's spec finalizers included) and no grace period.
func finalized(acc metav1.Object) bool {
	if acc.GetDeletionTimestamp() == nil || len(acc.GetFinalizers()) > 0 {
		return false
	}
	if ns, ok := acc.(*corev1.Namespace); ok && len(ns.Spec.Finalizers) > 0 {
		return false
	}
	g := acc.GetDeletionGracePeriodSeconds()
	return g == nil || *g == 0
}

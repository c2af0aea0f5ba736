package rest

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// toStorage converts a served object into its stored form.
func (q *req) toStorage(obj runtime.Object) (runtime.Object, error) {
	if q.res.Converter == nil {
		return obj, nil
	}
	out, err := q.res.Converter.ToStorage(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return out, nil
}

func (q *req) create() {
	if q.info.Name != "" {
		q.fail(apierrors.NewMethodNotSupported(q.res.GroupResource(), "create"))
		return
	}
	data, err := readBody(q.r)
	if err != nil {
		q.fail(err)
		return
	}
	served, warnings, err := decodeBody(q.r, q.res, data)
	if err != nil {
		q.fail(err)
		return
	}
	obj, err := q.toStorage(served)
	if err != nil {
		q.fail(err)
		return
	}
	defer q.serialize()()
	if err := q.prepareCreate(obj); err != nil {
		q.fail(err)
		return
	}
	acc, _ := meta.Accessor(obj)
	key := q.res.Key(acc.GetNamespace(), acc.GetName())
	o, typed, err := q.write(key, func(cur runtime.Object) (runtime.Object, error) {
		if cur != nil {
			if acc.GetGenerateName() != "" {
				return nil, apierrors.NewGenerateNameConflict(q.res.GroupResource(), acc.GetName(), 1)
			}
			return nil, apierrors.NewAlreadyExists(q.res.GroupResource(), acc.GetName())
		}
		return obj, q.admit(q.r.Context(), obj, nil)
	})
	if err != nil {
		q.fail(err)
		return
	}
	addWarnings(q.w, warnings)
	q.writeObject(http.StatusCreated, o, typed)
}

// prepareCreate checks that a new object's namespace exists and is not
// terminating, fills in the server-set metadata, applies the kind's defaults
// and mutating admission, and validates the object.
func (q *req) prepareCreate(obj runtime.Object) error {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if q.res.Namespaced {
		switch ns := acc.GetNamespace(); {
		case ns == "":
			acc.SetNamespace(q.info.Namespace)
		case q.info.Namespace != "" && ns != q.info.Namespace:
			return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		if acc.GetNamespace() == "" {
			return apierrors.NewBadRequest("the namespace of the object must be set")
		}
		// The namespace is checked first, as kube-apiserver's NamespaceLifecycle is the first admission.
		if err := q.checkNamespace(acc.GetNamespace()); err != nil {
			return err
		}
	} else {
		acc.SetNamespace("")
	}
	if acc.GetName() == "" && acc.GetGenerateName() != "" {
		acc.SetName(acc.GetGenerateName() + utilrand.String(5))
	}
	acc.SetUID(uuid.NewUUID())
	acc.SetCreationTimestamp(metav1.NewTime(q.h.opts.Clock.Now().Truncate(1e9)))
	acc.SetResourceVersion("")
	acc.SetDeletionTimestamp(nil)
	acc.SetDeletionGracePeriodSeconds(nil)
	acc.SetSelfLink("")
	if !q.isApply() {
		acc.SetManagedFields(nil) // tracked from the first apply on
	}
	acc.SetGeneration(0)
	q.res.Strategy.PrepareForCreate(obj)
	if err := q.mutate(obj, nil); err != nil {
		return err
	}
	if errs := q.res.Strategy.Validate(obj); len(errs) > 0 {
		return q.invalid(acc.GetName(), errs)
	}
	return nil
}

func (q *req) invalid(name string, errs field.ErrorList) error {
	return apierrors.NewInvalid(q.res.GVK().GroupKind(), name, errs)
}

// checkNamespace refuses writes into a missing or terminating namespace, as
// upstream's NamespaceLifecycle admission does.
func (q *req) checkNamespace(ns string) error {
	o, ok := q.h.store.Get("namespaces//" + ns)
	if !ok {
		return apierrors.NewNotFound(corev1.Resource("namespaces"), ns)
	}
	obj, err := q.h.store.Decode(o)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if obj.(*corev1.Namespace).DeletionTimestamp != nil {
		return apierrors.NewForbidden(q.res.GroupResource(), "", fmt.Errorf(
			"unable to create new content in namespace %s because it is being terminated", ns))
	}
	return nil
}

// mutate runs mutating admission on obj, the new state of a create (old nil)
// or update.
func (q *req) mutate(obj, old runtime.Object) error {
	if q.h.opts.Mutate == nil {
		return nil
	}
	return q.h.opts.Mutate.Mutate(q.r.Context(), &Attributes{Info: q.info, User: q.user, Resource: q.res, Object: obj, Old: old})
}

func (q *req) admit(ctx context.Context, obj, old runtime.Object) error {
	if q.h.opts.Admit == nil {
		return nil
	}
	return q.h.opts.Admit.Admit(ctx, &Attributes{Info: q.info, User: q.user, Resource: q.res, Object: obj, Old: old})
}

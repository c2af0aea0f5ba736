package apiserver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// SystemNamespaces exist in every cluster.
var SystemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// bootstrap creates the system namespaces, their default service accounts
// and their kube-root-ca.crt ConfigMaps when missing, and the kubernetes
// Service with the server's port, before the server serves (the control loop
// keeps them, and those of other namespaces, after).
func (s *Server) bootstrap(ctx context.Context) error {
	for _, ns := range SystemNamespaces {
		if err := s.ensure(ctx, "namespaces", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
		if err := s.ensureServiceAccount(ctx, ns); err != nil {
			return err
		}
		if err := s.ensure(ctx, "configmaps", rootCAUpdate(nil, ns, s.rootCA)); err != nil {
			return err
		}
	}
	return s.ensureKubernetesService(ctx)
}

func (s *Server) ensureServiceAccount(ctx context.Context, ns string) error {
	return s.ensure(ctx, "serviceaccounts", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}})
}

// ensure creates obj (a core/v1 kind) unless an object of that name exists.
func (s *Server) ensure(ctx context.Context, resource string, obj runtime.Object) error {
	res, ok := s.reg.Lookup("", "v1", resource)
	if !ok {
		return fmt.Errorf("unknown resource %s", resource)
	}
	m := obj.(metav1.Object)
	if _, ok := s.store.Get(res.Key(m.GetNamespace(), m.GetName())); ok {
		return nil
	}
	obj.GetObjectKind().SetGroupVersionKind(res.GVK())
	m.SetUID(uuid.NewUUID())
	m.SetCreationTimestamp(metav1.NewTime(s.cfg.Clock.Now().Truncate(1e9)))
	res.Strategy.PrepareForCreate(obj)
	_, _, err := s.store.Update(ctx, res.Key(m.GetNamespace(), m.GetName()), func(cur runtime.Object) (runtime.Object, error) {
		if cur != nil {
			return cur, nil
		}
		return obj, nil
	})
	if err != nil {
		return fmt.Errorf("create %s %s/%s: %w", resource, m.GetNamespace(), m.GetName(), err)
	}
	return nil
}

package apiserver

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RootCAConfigMap is the ConfigMap kube-controller-manager's root CA
// publisher keeps in every namespace: the CA bundle (key ca.crt) pods verify
// the API server with.
const RootCAConfigMap = "kube-root-ca.crt"

// Its annotation, as the publisher writes it.
const (
	rootCADescriptionKey = "kubernetes.io/description"
	rootCADescription    = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints " +
		"such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
)

// rootCAUpdate returns the kube-root-ca.crt ConfigMap to write in ns given
// the current one (nil when missing): nil when cur holds exactly ca and has
// the description; otherwise cur with its data replaced by ca and the
// description added (its other annotations kept), as kube-controller-manager
// repairs it.
func rootCAUpdate(cur *corev1.ConfigMap, ns string, ca []byte) *corev1.ConfigMap {
	data := map[string]string{"ca.crt": string(ca)}
	if cur == nil {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RootCAConfigMap, Namespace: ns,
			Annotations: map[string]string{rootCADescriptionKey: rootCADescription}}, Data: data}
	}
	if len(cur.Data) == 1 && cur.Data["ca.crt"] == string(ca) && len(cur.BinaryData) == 0 &&
		cur.Annotations[rootCADescriptionKey] != "" {
		return nil
	}
	next := cur.DeepCopy()
	next.Data, next.BinaryData = data, nil
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[rootCADescriptionKey] = rootCADescription
	return next
}

// publishRootCA creates or repairs the kube-root-ca.crt ConfigMap of an
// active namespace through the API, as kube-controller-manager's root CA
// publisher does. A namespace that is gone or terminating meanwhile is no
// error.
func (c *controller) publishRootCA(ctx context.Context, ns string) error {
	var cur *corev1.ConfigMap
	if o, ok := c.s.store.Get("configmaps/" + ns + "/" + RootCAConfigMap); ok {
		obj, err := c.s.store.Decode(o)
		if err != nil {
			return fmt.Errorf("decode %s/%s: %w", ns, RootCAConfigMap, err)
		}
		cur = obj.(*corev1.ConfigMap)
	}
	next := rootCAUpdate(cur, ns, c.s.rootCA)
	if next == nil {
		return nil
	}
	var err error
	if cur == nil {
		_, err = c.client.CoreV1().ConfigMaps(ns).Create(ctx, next, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsAlreadyExists(err) {
			return nil // the namespace went away or is terminating, or a concurrent pass created it
		}
	} else {
		_, err = c.client.CoreV1().ConfigMaps(ns).Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // the next pass sees the change
		}
	}
	if err != nil {
		return fmt.Errorf("publish %s/%s: %w", ns, RootCAConfigMap, err)
	}
	return nil
}

// isRootCAKey reports whether a store key is a namespace's kube-root-ca.crt.
func isRootCAKey(key string) bool {
	return strings.HasPrefix(key, "configmaps/") && strings.HasSuffix(key, "/"+RootCAConfigMap)
}

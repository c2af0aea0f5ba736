package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

// DRAAdminNamespaceLabel marks a namespace whose ResourceClaims may ask for
// admin access to devices.
const DRAAdminNamespaceLabel = "resource.kubernetes.io/admin-access"

// NamespaceGetter reads namespaces (the store's NotFound when missing).
type NamespaceGetter interface {
	Namespace(name string) (*corev1.Namespace, error)
}

// DRAAdminAccess is kube-apiserver's check (in its ResourceClaim and
// ResourceClaimTemplate strategies) that a new claim or template asks for
// adminAccess only in a namespace labelled
// resource.kubernetes.io/admin-access=true. Specs are immutable, so only
// creates are checked. It is safe for concurrent use.
type DRAAdminAccess struct {
	Namespaces NamespaceGetter
}

var _ rest.Mutator = DRAAdminAccess{}

// Mutate implements rest.Mutator; it never changes the object.
func (d DRAAdminAccess) Mutate(_ context.Context, a *rest.Attributes) error {
	if a.Old != nil || a.Resource.Group != resourcev1.GroupName {
		return nil
	}
	var reqs []resourcev1.DeviceRequest
	var ns, name, kind string
	switch o := a.Object.(type) {
	case *resourcev1.ResourceClaim:
		reqs, ns, name, kind = o.Spec.Devices.Requests, o.Namespace, o.Name, "ResourceClaim"
	case *resourcev1.ResourceClaimTemplate:
		reqs, ns, name, kind = o.Spec.Spec.Devices.Requests, o.Namespace, o.Name, "ResourceClaimTemplate"
	default:
		return nil
	}
	var p *field.Path
	for i, r := range reqs {
		if r.Exactly != nil && r.Exactly.AdminAccess != nil && *r.Exactly.AdminAccess {
			p = field.NewPath("spec", "devices", "requests").Index(i).Child("adminAccess")
			if kind == "ResourceClaimTemplate" {
				p = field.NewPath("spec", "spec", "devices", "requests").Index(i).Child("adminAccess")
			}
			break
		}
	}
	if p == nil {
		return nil
	}
	gk := resourcev1.SchemeGroupVersion.WithKind(kind).GroupKind()
	n, err := d.Namespaces.Namespace(ns)
	if err != nil {
		return apierrors.NewInvalid(gk, name, field.ErrorList{field.InternalError(p,
			fmt.Errorf("could not retrieve namespace to verify admin access: %w", err))})
	}
	if n.Labels[DRAAdminNamespaceLabel] != "true" {
		return apierrors.NewInvalid(gk, name, field.ErrorList{field.Forbidden(p, fmt.Sprintf(
			"admin access to devices requires the `%s: true` label on the containing namespace", DRAAdminNamespaceLabel))})
	}
	return nil
}

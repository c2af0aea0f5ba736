package registry

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// reviews are the create-only resources of authentication.k8s.io/v1 and
// authorization.k8s.io/v1 this server answers, as kube-apiserver lists them
// (selfsubjectrulesreviews aside).
func reviews() []*Resource {
	authn := func(name, kind string, newObj func() runtime.Object) *Resource {
		return &Resource{Group: authenticationv1.GroupName, Version: "v1", Name: name, Singular: lower(kind), Kind: kind,
			New: newObj, CreateOnly: true}
	}
	authz := func(name, kind string, namespaced bool, newObj func() runtime.Object) *Resource {
		return &Resource{Group: authorizationv1.GroupName, Version: "v1", Name: name, Singular: lower(kind), Kind: kind,
			Namespaced: namespaced, New: newObj, CreateOnly: true}
	}
	return []*Resource{
		authn("selfsubjectreviews", "SelfSubjectReview", func() runtime.Object { return &authenticationv1.SelfSubjectReview{} }),
		authn("tokenreviews", "TokenReview", func() runtime.Object { return &authenticationv1.TokenReview{} }),
		authz("localsubjectaccessreviews", "LocalSubjectAccessReview", true,
			func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} }),
		authz("selfsubjectaccessreviews", "SelfSubjectAccessReview", false,
			func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} }),
		authz("subjectaccessreviews", "SubjectAccessReview", false,
			func() runtime.Object { return &authorizationv1.SubjectAccessReview{} }),
	}
}

func lower(kind string) string {
	b := []byte(kind)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

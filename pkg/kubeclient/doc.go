// Package kubeclient is the kubelet's client of the Kubernetes API: the resources it reads and writes (pods,
// nodes, config maps, secrets, services, claims, persistent volumes, events and service account tokens in
// core/v1; Leases in coordination/v1), the reviews its endpoint asks for (TokenReview in authentication/v1,
// SubjectAccessReview in authorization/v1) and nothing else.
//
// client-go's generated clientset would serve as well, but its typed clients register every API group's types
// when the process starts, and the kubelet would carry all of that code in memory for the few it uses. This
// client is built from client-go's own generic client (k8s.io/client-go/gentype) over a scheme that holds only
// those groups, so it behaves as the generated one does (same requests, protobuf where the server offers it,
// one rate limiter shared by every group).
//
// The interfaces are subsets of client-go's, so a client-go clientset (such as the fake one in unit tests)
// serves through kubeclienttest.Wrap.
package kubeclient

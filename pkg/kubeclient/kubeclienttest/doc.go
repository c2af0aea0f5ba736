// Package kubeclienttest serves kubeclient.Interface (the narrow client the kubelet links, see pkg/kubeclient)
// from a client-go clientset, such as client-go's fake one, so unit tests drive the kubelet's pieces with a
// fake API. Tests only: the kubelet's binary must not link it (client-go's clientset is what kubeclient
// keeps out).
package kubeclienttest

// Package admission holds the mutating admission of the lightweight
// apiserver, as kube-apiserver's plugins of the same names apply it: the
// ServiceAccount plugin for pod creates (the default service account, the
// projected kube-api-access volume, image pull secrets, mountable secrets),
// and the allocation of Services' cluster IPs and node ports.
//
// Its decisions are pure functions; the plugins read the store through the
// small interfaces the server gives them and never write.
package admission

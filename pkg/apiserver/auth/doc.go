// Package auth secures the lightweight apiserver: the certificate authority
// and serving certificate it generates (pki.go); the service account signing
// key, the JWTs it signs with kube-apiserver's claims and their validation
// (jws.go, satoken.go, satoken_authn.go); authentication of requests by
// client certificate or by bearer token through TokenAuthenticators (static
// token file, service account tokens), with audiences, and the anonymous
// identity of the public health paths (authn.go); the authorization policy
// of admins, nodes, other users and anonymous callers (authz.go) with the
// node rules of upstream's Node authorizer (node.go, and node_storage.go for
// CSI drivers, CSINodes and VolumeAttachments); the answers to
// TokenReviews and SubjectAccessReviews from that same policy (review.go);
// and node-scoped admission as upstream's NodeRestriction plugin applies it,
// TokenRequests, claim status and CSINodes included (noderestriction.go).
//
// It reads objects only through the PodIndex, VolumeIndex, AttachmentIndex
// and ObjectGetter the server gives it and writes nothing but the key and
// certificate files of the PKI directory.
package auth

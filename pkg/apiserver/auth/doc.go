// Package auth secures the lightweight apiserver: the certificate authority
// and serving certificate it generates (pki.go), authentication of requests
// by client certificate or by bearer token through TokenAuthenticators (the
// static token file today) (authn.go), the authorization policy of admins,
// nodes and other users (authz.go) with the node rules of upstream's Node
// authorizer (node.go), the answers to TokenReviews and SubjectAccessReviews
// from that same policy (review.go), and node-scoped admission as upstream's
// NodeRestriction plugin applies it (noderestriction.go).
//
// It reads pods only through the PodIndex the server gives it and writes
// nothing but the key and certificate files of the PKI directory.
package auth

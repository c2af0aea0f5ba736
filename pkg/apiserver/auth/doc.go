// Package auth secures the lightweight apiserver: the certificate authority
// and serving certificate it generates (pki.go), authentication of requests
// by client certificate or bearer token (authn.go), and authorization of
// admins and nodes, with node-scoped admission as upstream's Node authorizer
// and NodeRestriction plugin apply it (node.go).
//
// It reads pods only through the PodIndex the server gives it and writes
// nothing but the key and certificate files of the PKI directory.
package auth

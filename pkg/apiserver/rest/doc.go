// Package rest serves the Kubernetes REST API for the resources in package
// registry, over the objects in package storage: get, list, watch, create,
// update, patch, delete and deletecollection, the status, binding, eviction
// and finalize subresources, content negotiation (JSON, YAML bodies,
// protobuf, Table, Table watch events), selectors, chunking, graceful
// deletion, dryRun=All (computed and admitted, never stored), and server-side
// apply with managedFields (upstream's field manager, tracked from an
// object's first apply on).
//
// It does not authenticate or authorize (the caller wraps it) and runs no
// background loops; admission beyond the kinds' own rules is delegated to an
// Admitter. Proxied subresources (log, exec, attach, portforward, proxy) are
// passed to a Proxy supplied by the caller; the create-only reviews
// (TokenReview, SubjectAccessReview and its local and self forms,
// SelfSubjectReview) are validated here and answered by a Reviewer, never
// stored.
package rest

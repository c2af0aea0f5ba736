// Package registry describes the resources the lightweight apiserver serves:
// one table of resource definitions (group, version, kind, scope, storage
// location) with, for each kind, its create/update preparation, defaults,
// validation and selectable fields, and the codec that stores them as JSON;
// and the create-only review resources, listed but never stored.
//
// It holds no state and does no I/O: the HTTP layer (package rest) drives it
// and package storage persists what it produces.
package registry

// Package openapi serves the apiserver's OpenAPI v3 documents: an index of
// group/versions and, for each, the paths and operations of its resources
// with the query parameters the server honours (fieldValidation among them,
// so kubectl leaves validation to the server) and the schemas of their kinds,
// derived from the Go API types, their patch-strategy tags and their
// generated field documentation (so kubectl's client-side apply and explain
// work). Required fields are not marked. The OpenAPI v2 document is not
// served.
//
// It only describes the registry; it serves no resources.
package openapi

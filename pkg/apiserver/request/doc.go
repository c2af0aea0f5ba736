// Package request parses an API request's path and method into the
// attributes the lightweight apiserver's authorizer and handlers act on, and
// carries the authenticated user in the request context. It does no I/O.
package request

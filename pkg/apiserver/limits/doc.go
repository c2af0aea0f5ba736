// Package limits bounds what a request can make the lightweight apiserver
// compute: resource quantities whose parse or arithmetic would not end in
// reasonable time or memory (huge exponents, thousands of digits), and JSON
// patches beyond kube-apiserver's operation and copy limits.
//
// It is pure: it inspects bytes and decoded JSON values and returns errors;
// callers (packages rest and registry) turn them into API errors.
package limits

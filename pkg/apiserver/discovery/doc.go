// Package discovery serves the lightweight apiserver's discovery documents
// (/api, /apis, their group and version documents, /version) from the
// resource table in package registry. It holds no state besides that table.
package discovery

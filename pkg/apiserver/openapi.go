package apiserver

import (
	"net/http"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
)

// serveOpenAPI serves minimal OpenAPI documents: an empty v2 document and a
// v3 index without group documents. kubectl then validates on the server
// (fieldValidation) rather than against schemas.
func serveOpenAPI(w http.ResponseWriter, r *http.Request, _ *registry.Registry) {
	switch r.URL.Path {
	case "/openapi/v3":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"paths":{}}`))
	default:
		http.NotFound(w, r)
	}
}

package openapi

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
)

const v3Prefix = "/openapi/v3"

// Handler serves /openapi/v3 and its group/version documents. The documents
// are built at the first request. It is safe for concurrent use.
type Handler struct {
	reg     *registry.Registry
	version string

	once  sync.Once
	err   error
	index []byte
	docs  map[string]served // by index key, "api/v1"
}

type served struct {
	body []byte
	hash string
}

// New returns a Handler describing reg; version is the served Kubernetes
// version (info.version of the documents).
func New(reg *registry.Registry, version string) *Handler {
	return &Handler{reg: reg, version: version}
}

// Serves reports whether path is an OpenAPI document path.
func (h *Handler) Serves(path string) bool {
	return path == v3Prefix || strings.HasPrefix(path, v3Prefix+"/") || path == "/openapi/v2"
}

// ServeHTTP serves the index or a group/version document.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == "/openapi/v2" {
		http.Error(w, "the OpenAPI v2 document is not served; use /openapi/v3", http.StatusNotFound)
		return
	}
	h.once.Do(h.build)
	if h.err != nil {
		http.Error(w, h.err.Error(), http.StatusInternalServerError)
		return
	}
	if r.URL.Path == v3Prefix {
		write(w, h.index, "")
		return
	}
	key := strings.TrimPrefix(r.URL.Path, v3Prefix+"/")
	doc, ok := h.docs[key]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if hash := r.URL.Query().Get("hash"); hash != "" && hash != doc.hash {
		http.Redirect(w, r, v3Prefix+"/"+key+"?hash="+doc.hash, http.StatusMovedPermanently)
		return
	}
	immutable := ""
	if r.URL.Query().Get("hash") != "" {
		immutable = doc.hash
	}
	write(w, doc.body, immutable)
}

func write(w http.ResponseWriter, body []byte, hash string) {
	w.Header().Set("Content-Type", "application/json")
	if hash != "" {
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Etag", `"`+hash+`"`)
	} else {
		w.Header().Set("Cache-Control", "no-cache, private")
	}
	_, _ = w.Write(body)
}

func (h *Handler) build() {
	type gvEntry struct {
		ServerRelativeURL string `json:"serverRelativeURL"`
	}
	index := map[string]map[string]gvEntry{"paths": {}}
	h.docs = map[string]served{}
	for _, gv := range h.reg.GroupVersions() {
		body, err := json.Marshal(buildGV(h.reg, gv, h.version))
		if err != nil {
			h.err = fmt.Errorf("openapi document of %s: %w", gv, err)
			return
		}
		key := Path(gv)
		doc := served{body: body, hash: fmt.Sprintf("%X", sha512.Sum512(body))}
		h.docs[key] = doc
		index["paths"][key] = gvEntry{ServerRelativeURL: v3Prefix + "/" + key + "?hash=" + doc.hash}
	}
	h.index, h.err = json.Marshal(index)
}

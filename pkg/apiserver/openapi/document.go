package openapi

import (
	"reflect"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
)

// Media types of request and response bodies.
var (
	bodyTypes  = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}
	patchTypes = []string{"application/json-patch+json", "application/merge-patch+json",
		"application/strategic-merge-patch+json", "application/apply-patch+yaml"}
)

// Query parameters, by the operations that honour them.
var (
	writeParams = []string{"dryRun", "fieldManager", "fieldValidation"}
	patchParams = []string{"dryRun", "fieldManager", "fieldValidation", "force"}
	listParams  = []string{"allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit",
		"resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch"}
	deleteParams = []string{"dryRun", "gracePeriodSeconds"}
	logParams    = []string{"container", "follow", "insecureSkipTLSVerifyBackend", "limitBytes", "previous",
		"sinceSeconds", "sinceTime", "tailLines", "timestamps"}
	execParams = []string{"command", "container", "stderr", "stdin", "stdout", "tty"}
)

// gvDocument is the OpenAPI v3 document of one group/version: the paths of
// its resources and the schemas of their kinds.
type gvDocument struct {
	OpenAPI    string                    `json:"openapi"`
	Info       map[string]string         `json:"info"`
	Paths      map[string]map[string]any `json:"paths"`
	Components map[string]any            `json:"components"`
}

// Path returns the index key of gv ("api/v1", "apis/coordination.k8s.io/v1").
func Path(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// buildGV returns the document of gv's resources in reg.
func buildGV(reg *registry.Registry, gv schema.GroupVersion, version string) *gvDocument {
	defs := definitions{}
	doc := &gvDocument{OpenAPI: "3.0.0", Info: map[string]string{"title": "Kubernetes", "version": version},
		Paths: map[string]map[string]any{}}
	statusName := defs.add(reflect.TypeOf(metav1.Status{}))
	deleteName := defs.add(reflect.TypeOf(metav1.DeleteOptions{}))
	for _, r := range reg.All() {
		if r.GroupVersion() != gv {
			continue
		}
		gvk := r.GVK()
		kind := defs.add(reflect.TypeOf(r.New()))
		defs[kind].AddExtension(extGVK, []map[string]string{gvkMap(gvk)})
		b := &builder{res: r, gvk: gvk, kind: kind, status: statusName, deleteOpts: deleteName}
		if r.CreateOnly {
			b.addCreatePath(doc.Paths)
			continue
		}
		b.list = defs.add(reflect.TypeOf(r.NewList()))
		defs[b.list].AddExtension(extGVK, []map[string]string{gvkMap(gv.WithKind(gvk.Kind + "List"))})
		b.addPaths(doc.Paths, defs)
	}
	doc.Components = map[string]any{"schemas": map[string]*spec.Schema(defs)}
	return doc
}

func gvkMap(gvk schema.GroupVersionKind) map[string]string {
	return map[string]string{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}
}

// subresourceKinds are the request bodies of the subresources that take one
// of their own kind.
var subresourceKinds = map[string]struct {
	obj any
	gvk schema.GroupVersionKind
}{
	"binding":  {&corev1.Binding{}, corev1.SchemeGroupVersion.WithKind("Binding")},
	"eviction": {&policyv1.Eviction{}, policyv1.SchemeGroupVersion.WithKind("Eviction")},
	"token":    {&authenticationv1.TokenRequest{}, authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")},
}

// builder writes the paths of one resource.
type builder struct {
	res                            *registry.Resource
	gvk                            schema.GroupVersionKind
	kind, list, status, deleteOpts string
}

func (b *builder) addPaths(paths map[string]map[string]any, defs definitions) {
	r := b.res
	base := "/" + Path(r.GroupVersion())
	coll, nsParam := base+"/"+r.Name, []any{}
	if r.Namespaced {
		coll = base + "/namespaces/{namespace}/" + r.Name
		nsParam = []any{pathParam("namespace")}
		paths[base+"/"+r.Name] = map[string]any{
			"get": b.op("list", "ForAllNamespaces", "list", b.list, nil, nil, listParams),
		}
	}
	nameParam := append(append([]any{}, nsParam...), pathParam("name"))
	paths[coll] = map[string]any{
		"parameters": nsParam,
		"get":        b.op("list", "", "list", b.list, nil, nil, listParams),
		"post":       b.op("create", "", "post", b.kind, &b.kind, bodyTypes, writeParams),
		"delete":     b.op("deletecollection", "", "deletecollection", b.status, &b.deleteOpts, bodyTypes, append(deleteParams, listParams...)),
	}
	paths[coll+"/{name}"] = map[string]any{
		"parameters": nameParam,
		"get":        b.op("read", "", "get", b.kind, nil, nil, nil),
		"put":        b.op("replace", "", "put", b.kind, &b.kind, bodyTypes, writeParams),
		"patch":      b.op("patch", "", "patch", b.kind, nil, patchTypes, patchParams),
		"delete":     b.op("delete", "", "delete", b.kind, &b.deleteOpts, bodyTypes, deleteParams),
	}
	for _, sub := range r.Subresources {
		p := map[string]any{"parameters": nameParam}
		suffix := strings.ToUpper(sub[:1]) + sub[1:]
		switch sub {
		case "status", "resize", "ephemeralcontainers":
			p["get"] = b.op("read", suffix, "get", b.kind, nil, nil, nil)
			p["put"] = b.op("replace", suffix, "put", b.kind, &b.kind, bodyTypes, writeParams)
			p["patch"] = b.op("patch", suffix, "patch", b.kind, nil, patchTypes, patchParams)
		case "binding", "eviction", "token":
			k := subresourceKinds[sub]
			body := defs.add(reflect.TypeOf(k.obj))
			defs[body].Extensions = nil
			defs[body].AddExtension(extGVK, []map[string]string{gvkMap(k.gvk)})
			p["post"] = b.op("create", suffix, "post", body, &body, bodyTypes, writeParams)
		case "finalize":
			p["put"] = b.op("replace", suffix, "put", b.kind, &b.kind, bodyTypes, writeParams)
		case "log":
			op := b.op("read", suffix, "get", "", nil, nil, logParams)
			op["responses"] = map[string]any{"200": map[string]any{"description": "OK",
				"content": map[string]any{"text/plain": map[string]any{"schema": map[string]string{"type": "string"}}}}}
			p["get"] = op
		case "exec", "attach", "portforward", "proxy":
			params := execParams
			switch sub {
			case "portforward":
				params = []string{"ports"}
			case "proxy":
				params = []string{"path"}
			}
			p["get"] = b.op("connectGet", suffix, "connect", "", nil, nil, params)
			p["post"] = b.op("connectPost", suffix, "connect", "", nil, nil, params)
		default:
			continue
		}
		paths[coll+"/{name}/"+sub] = p
	}
}

// addCreatePath writes the one path of a create-only resource: a POST of the
// kind answered with the kind, as kube-apiserver describes the reviews.
func (b *builder) addCreatePath(paths map[string]map[string]any) {
	r := b.res
	base := "/" + Path(r.GroupVersion())
	coll, nsParam := base+"/"+r.Name, []any{}
	if r.Namespaced {
		coll = base + "/namespaces/{namespace}/" + r.Name
		nsParam = []any{pathParam("namespace")}
	}
	post := b.op("create", "", "post", b.kind, &b.kind, bodyTypes, writeParams)
	responses := post["responses"].(map[string]any)
	responses["201"] = map[string]any{"description": "Created", "content": responses["200"].(map[string]any)["content"]}
	paths[coll] = map[string]any{"parameters": nsParam, "post": post}
}

// op returns one operation. resp names the schema of a 200 answer (none when
// empty), body the schema of the request body in the given media types.
func (b *builder) op(verb, suffix, action, resp string, body *string, media, query []string) map[string]any {
	id := verb + opGroup(b.gvk.GroupVersion())
	if b.res.Namespaced && suffix != "ForAllNamespaces" {
		id += "Namespaced"
	}
	id += b.gvk.Kind + suffix
	op := map[string]any{"operationId": id, extAction: action, extGVK: gvkMap(b.gvk)}
	var params []any
	for _, q := range query {
		params = append(params, queryParam(q))
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	if len(media) > 0 {
		content := map[string]any{}
		for _, m := range media {
			s := map[string]any{"type": "object"}
			if body != nil {
				s = map[string]any{"$ref": "#/components/schemas/" + *body}
			}
			content[m] = map[string]any{"schema": s}
		}
		op["requestBody"] = map[string]any{"content": content, "required": true}
	}
	if resp != "" {
		content := map[string]any{}
		for _, m := range bodyTypes {
			content[m] = map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/" + resp}}
		}
		op["responses"] = map[string]any{"200": map[string]any{"description": "OK", "content": content}}
	} else if _, ok := op["responses"]; !ok {
		op["responses"] = map[string]any{"200": map[string]any{"description": "OK"}}
	}
	return op
}

// opGroup returns the operation id part naming gv: "CoreV1", "CoordinationV1".
func opGroup(gv schema.GroupVersion) string {
	g := "core"
	if gv.Group != "" {
		g, _, _ = strings.Cut(gv.Group, ".")
	}
	return strings.ToUpper(g[:1]) + g[1:] + strings.ToUpper(gv.Version[:1]) + gv.Version[1:]
}

func pathParam(name string) map[string]any {
	return map[string]any{"name": name, "in": "path", "required": true, "schema": map[string]string{"type": "string"}}
}

func queryParam(name string) map[string]any {
	typ := "string"
	switch name {
	case "allowWatchBookmarks", "watch", "follow", "previous", "timestamps", "stdin", "stdout", "stderr",
		"tty", "insecureSkipTLSVerifyBackend", "force", "sendInitialEvents":
		typ = "boolean"
	case "limit", "timeoutSeconds", "gracePeriodSeconds", "limitBytes", "sinceSeconds", "tailLines":
		typ = "integer"
	}
	s := map[string]any{"type": typ}
	if name == "command" || name == "ports" {
		s = map[string]any{"type": "array", "items": map[string]string{"type": typ}}
	}
	return map[string]any{"name": name, "in": "query", "schema": s}
}

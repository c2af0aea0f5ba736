package rest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// Attributes describe a write for admission. Object is the stored form of the
// new state (nil for a delete); Old the current one (nil for a create).
type Attributes struct {
	Info     *request.Info
	User     *request.User
	Resource *registry.Resource
	Object   runtime.Object
	Old      runtime.Object
}

// Admitter decides whether a write may proceed. It runs inside the store's
// update, so it must not write.
type Admitter interface {
	Admit(ctx context.Context, a *Attributes) error
}

// Mutator is mutating admission: it may change a.Object (the new state of a
// create or of an update of the main resource, after the kind's defaults and
// before its validation) or refuse it. It may read the store and may run
// more than once for one request, inside the store's update, so it must not
// write.
type Mutator interface {
	Mutate(ctx context.Context, a *Attributes) error
}

// Proxy serves the proxied subresources (pods log/exec/attach/portforward,
// nodes proxy).
type Proxy interface {
	ServeProxy(w http.ResponseWriter, r *http.Request, info *request.Info)
}

// Options configure a Handler. Zero fields take defaults.
type Options struct {
	Clock            clock.PassiveClock
	Admit            Admitter
	Mutate           Mutator
	Proxy            Proxy
	Reviewer         Reviewer      // answers the create-only reviews; they are refused without it
	Tokens           *TokenOptions // serves serviceaccounts/token; refused without it
	BookmarkInterval time.Duration // 1 minute if 0
	// MinWatchTimeout is the base of a watch's randomized duration when the
	// client gives no timeoutSeconds; 30 minutes if 0.
	MinWatchTimeout time.Duration
}

// Handler serves resource requests. It is safe for concurrent use.
type Handler struct {
	reg    *registry.Registry
	store  *storage.Store
	opts   Options
	fields fieldManagers
	// serial is held by the creates and updates of resources that serialize
	// their writes, for the whole write.
	serial sync.Mutex
}

// NewHandler returns a Handler over store for the resources in reg.
func NewHandler(reg *registry.Registry, store *storage.Store, opts Options) *Handler {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.BookmarkInterval == 0 {
		opts.BookmarkInterval = time.Minute
	}
	if opts.MinWatchTimeout == 0 {
		opts.MinWatchTimeout = 30 * time.Minute
	}
	return &Handler{reg: reg, store: store, opts: opts}
}

// ServeHTTP serves one resource request; the request info must be in the
// context (request.WithInfo).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	info := request.InfoFrom(r.Context())
	if info == nil {
		p := request.Parse(r)
		info = &p
	}
	res, ok := h.reg.Lookup(info.Group, info.Version, info.Resource)
	if !ok || (!res.Namespaced && info.Namespace != "" && info.Resource != "namespaces") {
		writeError(w, apierrors.NewNotFound(schema.GroupResource{Group: info.Group, Resource: info.Resource}, info.Name))
		return
	}
	if info.Subresource != "" && !res.HasSubresource(info.Subresource) {
		writeError(w, apierrors.NewNotFound(res.GroupResource(), info.Name))
		return
	}
	rq := &req{h: h, w: w, r: r, info: info, res: res, user: request.UserFrom(r.Context())}
	rq.serve()
}

// req is one request in flight.
type req struct {
	h    *Handler
	w    http.ResponseWriter
	r    *http.Request
	info *request.Info
	res  *registry.Resource
	user *request.User
	// dryRun is set by dryRun=All: the write is computed, admitted and
	// answered, but not stored.
	dryRun bool
}

func (q *req) fail(err error) { writeError(q.w, err) }

func (q *req) serve() {
	dryRun, err := parseDryRun(q.r.URL.Query()["dryRun"])
	if err != nil {
		q.fail(err)
		return
	}
	q.dryRun = dryRun
	if q.res.CreateOnly {
		q.onlyVerb("create", q.review)
		return
	}
	switch q.info.Subresource {
	case "log", "exec", "attach", "portforward", "proxy":
		if q.h.opts.Proxy == nil {
			q.fail(apierrors.NewServiceUnavailable("proxying to nodes is not configured"))
			return
		}
		q.h.opts.Proxy.ServeProxy(q.w, q.r, q.info)
		return
	case "binding":
		q.onlyVerb("create", q.bind)
		return
	case "eviction":
		q.onlyVerb("create", q.evict)
		return
	case "token":
		q.onlyVerb("create", q.requestToken)
		return
	case "status", "finalize", "resize", "ephemeralcontainers":
		switch q.info.Verb {
		case "get":
			q.get()
		case "update", "patch":
			q.update()
		default:
			q.fail(apierrors.NewMethodNotSupported(q.res.GroupResource(), q.info.Verb))
		}
		return
	}
	switch q.info.Verb {
	case "get":
		q.get()
	case "list":
		q.list()
	case "watch":
		q.watch()
	case "create":
		q.create()
	case "update", "patch":
		q.update()
	case "delete":
		q.delete()
	case "deletecollection":
		q.deleteCollection()
	default:
		q.fail(apierrors.NewMethodNotSupported(q.res.GroupResource(), q.info.Verb))
	}
}

func (q *req) onlyVerb(verb string, fn func()) {
	if q.info.Verb != verb {
		q.fail(apierrors.NewMethodNotSupported(q.res.GroupResource(), q.info.Verb))
		return
	}
	fn()
}

// parseDryRun reads the dryRun query values: none, or "All".
func parseDryRun(vals []string) (bool, error) {
	dry := false
	for _, v := range vals {
		if v != metav1.DryRunAll {
			return false, apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("CreateOptions").GroupKind(), "",
				field.ErrorList{field.NotSupported(field.NewPath("dryRun"), v, []string{metav1.DryRunAll})})
		}
		dry = true
	}
	return dry, nil
}

// serialize takes the lock of resources that serialize their writes (see
// registry.Resource.SerializeWrites) and returns its release.
func (q *req) serialize() func() {
	if !q.res.SerializeWrites {
		return func() {}
	}
	q.h.serial.Lock()
	return q.h.serial.Unlock
}

// write applies fn to the object at key: through the store, or only computed
// for a dry run.
func (q *req) write(key string, fn storage.UpdateFunc) (*storage.Object, runtime.Object, error) {
	if q.dryRun {
		return q.h.store.DryRun(key, fn)
	}
	return q.h.store.Update(q.r.Context(), key, fn)
}

// key returns the storage key of the named object.
func (q *req) key() string { return q.res.Key(q.ns(), q.info.Name) }

// ns returns the request's namespace, empty for cluster-scoped resources.
func (q *req) ns() string {
	if !q.res.Namespaced {
		return ""
	}
	return q.info.Namespace
}

// served converts a stored typed object into the served version.
func (q *req) served(obj runtime.Object) (runtime.Object, error) {
	if q.res.Converter == nil {
		return obj, nil
	}
	return q.res.Converter.FromStorage(obj)
}

// writeObject writes a stored object in the negotiated format.
func (q *req) writeObject(code int, o *storage.Object, typed runtime.Object) {
	out, err := negotiate(q.r)
	if err != nil {
		q.fail(err)
		return
	}
	if out.rawJSON() && q.res.Converter == nil {
		q.w.Header().Set("Content-Type", mediaJSON)
		q.w.WriteHeader(code)
		_, _ = q.w.Write(o.Raw)
		return
	}
	if typed == nil {
		if typed, err = q.h.store.Decode(o); err != nil {
			q.fail(apierrors.NewInternalError(fmt.Errorf("decode %s: %w", o.Key, err)))
			return
		}
	}
	if typed, err = q.served(typed); err != nil {
		q.fail(apierrors.NewInternalError(err))
		return
	}
	if out.table {
		tbl, err := q.table([]runtime.Object{typed}, "", "", true)
		if err != nil {
			q.fail(err)
			return
		}
		out.encode(q.w, code, tbl, tableGV)
		return
	}
	out.encode(q.w, code, typed, q.res.GroupVersion())
}

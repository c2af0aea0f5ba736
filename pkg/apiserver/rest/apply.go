package rest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/nodeagent/kubelet/pkg/apiserver/limits"
	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
)

// Server-side apply and managedFields, with upstream's field manager and the
// built-in types' merge schema. Ownership is tracked from an object's first
// apply on (upstream's behaviour with a track-on-create probability of 0):
// objects only ever written with create, update and patch carry no
// managedFields and pay nothing for them.

// fieldManagers builds field managers lazily, one per resource and
// subresource. It is safe for concurrent use.
type fieldManagers struct {
	once sync.Once
	tc   managedfields.TypeConverter

	mu sync.Mutex
	m  map[string]*managedfields.FieldManager
}

func (f *fieldManagers) get(res *registry.Resource, sub string) (*managedfields.FieldManager, error) {
	f.once.Do(func() { f.tc = applyconfigurations.NewTypeConverter(apiScheme) })
	key := res.GVK().String() + "/" + sub
	f.mu.Lock()
	defer f.mu.Unlock()
	if fm, ok := f.m[key]; ok {
		return fm, nil
	}
	gv := res.GroupVersion()
	fm, err := managedfields.NewDefaultFieldManager(f.tc, apiScheme, apiScheme, apiScheme, res.GVK(), gv, sub,
		resetFields(res, sub))
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("field manager for %s: %w", res.GVK(), err))
	}
	if f.m == nil {
		f.m = map[string]*managedfields.FieldManager{}
	}
	f.m[key] = fm
	return fm, nil
}

// resetFields are the fields a write of (sub)resource may not change, so no
// manager of that write owns them: status through the main resource, the
// rest through status.
func resetFields(res *registry.Resource, sub string) map[fieldpath.APIVersion]fieldpath.Filter {
	if !res.HasSubresource("status") {
		return nil
	}
	set := fieldpath.NewSet(fieldpath.MakePathOrDie("status"))
	if sub == "status" {
		set = fieldpath.NewSet(fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("metadata"))
	}
	return map[fieldpath.APIVersion]fieldpath.Filter{
		fieldpath.APIVersion(res.GroupVersion().String()): fieldpath.NewExcludeSetFilter(set)}
}

// applyRequest is a parsed server-side apply patch.
type applyRequest struct {
	obj     *unstructured.Unstructured
	manager string
	force   bool
}

// parseApply validates an apply patch and its options.
func (q *req) parseApply(data []byte) (*applyRequest, error) {
	if q.res.Converter != nil || (q.info.Subresource != "" && q.info.Subresource != "status") {
		return nil, unsupportedMediaType(string(types.ApplyYAMLPatchType))
	}
	params := q.r.URL.Query()
	a := &applyRequest{manager: params.Get("fieldManager"), obj: &unstructured.Unstructured{Object: map[string]any{}}}
	optsKind := metav1.SchemeGroupVersion.WithKind("PatchOptions").GroupKind()
	if a.manager == "" {
		return nil, apierrors.NewInvalid(optsKind, "", field.ErrorList{
			field.Required(field.NewPath("fieldManager"), "is required for apply patch")})
	}
	switch f := params.Get("force"); f {
	case "", "false":
	case "true":
		a.force = true
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid force %q", f))
	}
	if err := yaml.Unmarshal(data, &a.obj.Object); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	if err := limits.CheckJSON(reflect.TypeOf(q.res.New()), a.obj.Object, nil); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	if v := params.Get("fieldValidation"); v == "" || v == metav1.FieldValidationStrict {
		if err := yaml.UnmarshalStrict(data, &map[string]any{}); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding YAML: %v", err))
		}
	}
	if gvk := a.obj.GroupVersionKind(); gvk != q.res.GVK() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the apply patch is a %s, the request is for a %s", gvk, q.res.GVK()))
	}
	if n := a.obj.GetName(); n != q.info.Name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", n, q.info.Name))
	}
	if ns := a.obj.GetNamespace(); q.res.Namespaced && ns != "" && ns != q.info.Namespace {
		return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return a, nil
}

// applyTo applies a to cur (an empty object named by the request for a
// create) and returns the result with its managedFields.
func (q *req) applyTo(cur runtime.Object, a *applyRequest) (runtime.Object, error) {
	fm, err := q.h.fields.get(q.res, q.info.Subresource)
	if err != nil {
		return nil, err
	}
	cur.GetObjectKind().SetGroupVersionKind(q.res.GVK())
	out, err := fm.Apply(cur, a.obj.DeepCopy(), a.manager, a.force)
	if err != nil {
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			return nil, err
		}
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return out, nil
}

// newForApply returns the empty object an apply creates from.
func (q *req) newForApply() runtime.Object {
	obj := q.res.New()
	acc, _ := meta.Accessor(obj)
	acc.SetName(q.info.Name)
	acc.SetNamespace(q.ns())
	return obj
}

// trackFields records the managers of an update in obj's managedFields when
// old is tracked (has managedFields), and clears them otherwise.
func (q *req) trackFields(old, obj runtime.Object) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	oldAcc, err := meta.Accessor(old)
	if err != nil || len(oldAcc.GetManagedFields()) == 0 || q.res.Converter != nil {
		acc.SetManagedFields(nil)
		return
	}
	fm, err := q.h.fields.get(q.res, q.info.Subresource)
	if err != nil {
		acc.SetManagedFields(nil)
		return
	}
	old.GetObjectKind().SetGroupVersionKind(q.res.GVK())
	obj.GetObjectKind().SetGroupVersionKind(q.res.GVK())
	out := fm.UpdateNoErrors(old, obj, q.manager())
	if outAcc, err := meta.Accessor(out); err == nil {
		acc.SetManagedFields(outAcc.GetManagedFields())
	}
}

// manager names the writer of an update: the fieldManager parameter, or the
// user agent's first word, as upstream.
func (q *req) manager() string {
	if m := q.r.URL.Query().Get("fieldManager"); m != "" {
		return m
	}
	ua, _, _ := strings.Cut(q.r.UserAgent(), "/")
	if len(ua) > 128 {
		ua = ua[:128]
	}
	return ua
}

// isApply reports whether the request is a server-side apply.
func (q *req) isApply() bool {
	return q.info.Verb == "patch" && strings.HasPrefix(q.r.Header.Get("Content-Type"), string(types.ApplyYAMLPatchType))
}

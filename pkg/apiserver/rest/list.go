package rest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

func (q *req) get() {
	rv, err := parseResourceVersion(q.r.URL.Query().Get("resourceVersion"))
	if err == nil {
		err = q.checkReadVersion(rv)
	}
	if err != nil {
		q.fail(err)
		return
	}
	o, ok := q.h.store.Get(q.key())
	if !ok {
		q.fail(apierrors.NewNotFound(q.res.GroupResource(), q.info.Name))
		return
	}
	if o.Corrupt != nil {
		q.fail(o.Corrupt)
		return
	}
	q.writeObject(http.StatusOK, o, nil)
}

// selector is a parsed label and field selector.
type selector struct {
	labels labels.Selector
	fields fields.Selector
}

func (s selector) empty() bool { return s.labels.Empty() && s.fields.Empty() }

func (s selector) matches(o *storage.Object) bool {
	return s.labels.Matches(o.Labels) && s.fields.Matches(o.Fields)
}

// parseSelector parses the labelSelector and fieldSelector parameters,
// rejecting field labels the resource does not support.
func parseSelector(res *registry.Resource, q map[string][]string) (selector, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	ls, err := labels.Parse(get("labelSelector"))
	if err != nil {
		return selector{}, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
	}
	fs, err := fields.ParseSelector(get("fieldSelector"))
	if err != nil {
		return selector{}, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
	}
	known := res.Strategy.Fields(res.NewStored())
	fs, err = fs.Transform(func(label, value string) (string, string, error) {
		if res.Converter != nil {
			mapped, ok := res.Converter.FieldLabel(label)
			if !ok {
				return "", "", apierrors.NewBadRequest(fmt.Sprintf("%q is not a known field selector", label))
			}
			label = mapped
		}
		if _, ok := known[label]; !ok {
			names := make([]string, 0, len(known))
			for k := range known {
				names = append(names, strconv.Quote(k))
			}
			sort.Strings(names)
			return "", "", apierrors.NewBadRequest(fmt.Sprintf("%q is not a known field selector: only %s",
				label, strings.Join(names, ", ")))
		}
		return label, value, nil
	})
	if err != nil {
		return selector{}, err
	}
	return selector{labels: ls, fields: fs}, nil
}

// continueToken is the opaque list continuation.
type continueToken struct {
	RV    uint64 `json:"rv"`
	Start string `json:"start"`
}

func encodeContinue(t continueToken) string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.Start == "" {
		return t, apierrors.NewBadRequest("invalid continue token")
	}
	return t, nil
}

// listPage is the result of one list request.
type listPage struct {
	items     []*storage.Object
	rv        uint64
	cont      string
	remaining *int64
}

func (q *req) listObjects() (*listPage, error) {
	params := q.r.URL.Query()
	sel, err := parseSelector(q.res, params)
	if err != nil {
		return nil, err
	}
	if err := validateListOptions(params); err != nil {
		return nil, err
	}
	minRV, err := parseResourceVersion(params.Get("resourceVersion"))
	if err != nil {
		return nil, err
	}
	if err := q.checkReadVersion(minRV); err != nil {
		return nil, err
	}
	var limit int64
	if s := params.Get("limit"); s != "" {
		if limit, err = strconv.ParseInt(s, 10, 64); err != nil || limit < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid limit %q", s))
		}
	}
	if err := q.readable(storage.Under(q.res.Prefix(q.ns()))); err != nil {
		return nil, err
	}
	objs, rv := q.h.store.List(q.res.Prefix(q.ns()))
	start := ""
	if c := params.Get("continue"); c != "" {
		tok, err := decodeContinue(c)
		if err != nil {
			return nil, err
		}
		if err := q.checkReadVersion(tok.RV); err != nil {
			return nil, err
		}
		start, rv = tok.Start, tok.RV
		objs = objs[sort.Search(len(objs), func(i int) bool { return objs[i].Key > start }):]
	}
	page := &listPage{rv: rv}
	for i, o := range objs {
		if !sel.matches(o) {
			continue
		}
		if limit > 0 && int64(len(page.items)) == limit {
			page.cont = encodeContinue(continueToken{RV: rv, Start: page.items[len(page.items)-1].Key})
			if sel.empty() {
				n := int64(len(objs) - i)
				page.remaining = &n
			}
			break
		}
		page.items = append(page.items, o)
	}
	return page, nil
}

func (q *req) list() {
	page, err := q.listObjects()
	if err != nil {
		q.fail(err)
		return
	}
	out, err := negotiate(q.r)
	if err != nil {
		q.fail(err)
		return
	}
	if out.rawJSON() && q.res.Converter == nil {
		q.writeRawList(page)
		return
	}
	typed := make([]runtime.Object, 0, len(page.items))
	for _, o := range page.items {
		obj, err := q.h.store.Decode(o)
		if err == nil {
			obj, err = q.served(obj)
		}
		if err != nil {
			q.fail(apierrors.NewInternalError(err))
			return
		}
		typed = append(typed, obj)
	}
	rv := strconv.FormatUint(page.rv, 10)
	if out.table {
		tbl, err := q.table(typed, rv, page.cont, true)
		if err != nil {
			q.fail(err)
			return
		}
		out.encode(q.w, http.StatusOK, tbl, tableGV)
		return
	}
	list := q.res.NewList()
	if err := meta.SetList(list, typed); err != nil {
		q.fail(apierrors.NewInternalError(err))
		return
	}
	lm, _ := meta.ListAccessor(list)
	lm.SetResourceVersion(rv)
	lm.SetContinue(page.cont)
	lm.SetRemainingItemCount(page.remaining)
	out.encode(q.w, http.StatusOK, list, q.res.GroupVersion())
}

// writeRawList writes a JSON list by joining the stored objects' bytes.
func (q *req) writeRawList(page *listPage) {
	var buf bytes.Buffer
	size := 128
	for _, o := range page.items {
		size += len(o.Raw) + 1
	}
	buf.Grow(size)
	apiVersion := q.res.GroupVersion().String()
	fmt.Fprintf(&buf, `{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"%d"`, q.res.Kind+"List", apiVersion, page.rv)
	if page.cont != "" {
		fmt.Fprintf(&buf, `,"continue":%q`, page.cont)
	}
	if page.remaining != nil {
		fmt.Fprintf(&buf, `,"remainingItemCount":%d`, *page.remaining)
	}
	buf.WriteString(`},"items":[`)
	for i, o := range page.items {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(bytes.TrimRight(o.Raw, "\n"))
	}
	buf.WriteString("]}\n")
	q.w.Header().Set("Content-Type", mediaJSON)
	q.w.WriteHeader(http.StatusOK)
	_, _ = q.w.Write(buf.Bytes())
}

// readable fails, naming the keys, when span holds stored objects that do not decode: a list or watch
// without them would tell its reader they are gone (storage/corrupt.go).
func (q *req) readable(span storage.Span) error {
	if bad := q.h.store.CorruptIn(span); len(bad) > 0 {
		return &storage.ReadError{Resource: q.res.GroupResource(), Corrupt: bad}
	}
	return nil
}

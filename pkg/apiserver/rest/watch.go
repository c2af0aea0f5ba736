package rest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// InitialEventsEndAnnotation marks the bookmark ending a watch's initial events.
const InitialEventsEndAnnotation = metav1.InitialEventsAnnotationKey

func (q *req) watch() {
	params := q.r.URL.Query()
	sel, err := parseSelector(q.res, params)
	if err != nil {
		q.fail(err)
		return
	}
	out, err := negotiate(q.r)
	if err != nil {
		q.fail(err)
		return
	}
	table := out.table
	if table {
		out, _ = outputFor(mediaJSON, false)
	}
	span := storage.Under(q.res.Prefix(q.ns()))
	if q.info.Name != "" {
		// As upstream: a watch of one named object takes no field selector but one selecting that name.
		if !sel.fields.Empty() {
			if n, ok := sel.fields.RequiresExactMatch("metadata.name"); !ok || n != q.info.Name {
				q.fail(apierrors.NewBadRequest("fieldSelector metadata.name doesn't match requested name"))
				return
			}
		}
		span = storage.Only(q.key())
	}
	bookmarks := params.Get("allowWatchBookmarks") == "true"
	rvParam := params.Get("resourceVersion")
	sendInitial := rvParam == "" || rvParam == "0"
	initialEnd := false
	if s := params.Get("sendInitialEvents"); s != "" {
		if params.Get("resourceVersionMatch") != string(metav1.ResourceVersionMatchNotOlderThan) || !bookmarks {
			q.fail(apierrors.NewBadRequest("sendInitialEvents requires resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true"))
			return
		}
		sendInitial = s == "true"
		initialEnd = sendInitial
	}
	rv, err := parseResourceVersion(rvParam)
	if err != nil {
		q.fail(err)
		return
	}
	if err := q.readable(span); err != nil {
		q.fail(err)
		return
	}
	var initial []*storage.Object
	var w *storage.Watch
	tooLarge := q.checkReadVersion(rv)
	switch {
	case tooLarge != nil:
	case sendInitial:
		initial, w = q.h.store.SnapshotSpan(span)
	case rv == 0: // sendInitialEvents=false: from now on
		w, _ = q.h.store.WatchSpan(span, q.h.store.CurrentRV())
	default:
		if w, err = q.h.store.WatchSpan(span, rv); err != nil {
			q.fail(apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, q.h.store.CurrentRV())))
			return
		}
	}
	timeout := q.h.opts.MinWatchTimeout + time.Duration(rand.Int64N(int64(q.h.opts.MinWatchTimeout)))
	if s := params.Get("timeoutSeconds"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
			timeout = time.Duration(n) * time.Second
		}
	}
	ew := &eventWriter{q: q, out: out, table: table}
	q.w.Header().Set("Content-Type", out.mediaType)
	if out.info.StreamSerializer != nil && out.mediaType == mediaProtobuf {
		q.w.Header().Set("Content-Type", out.mediaType+";stream=watch")
	}
	q.w.Header().Set("Transfer-Encoding", "chunked")
	q.w.WriteHeader(http.StatusOK)
	flusher, _ := q.w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}

	if tooLarge != nil { // as upstream: once the version parses, a watch fails by an ERROR event
		st := tooLarge.(apierrors.APIStatus).Status()
		_ = ew.writeTyped(watch.Error, &st)
		flush()
		return
	}
	for _, o := range initial {
		if sel.matches(o) {
			if err := ew.write(watch.Added, o); err != nil {
				return
			}
		}
	}
	if initialEnd {
		if err := ew.bookmark(w.Cursor(), true); err != nil {
			return
		}
	}
	flush()

	ctx := q.r.Context()
	deadline := q.h.opts.Clock.Now().Add(timeout)
	tick := time.NewTicker(min(q.h.opts.BookmarkInterval, timeout))
	defer tick.Stop()
	wake := make(chan struct{})
	go func() {
		defer close(wake)
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}()
	for {
		evs, err := w.Next(ctx, wake)
		if errors.Is(err, storage.ErrTooOld) {
			st := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d", w.Cursor())).Status()
			_ = ew.writeTyped(watch.Error, &st)
			flush()
			return
		}
		if err != nil {
			return
		}
		for _, ev := range evs {
			typ, ok := filterEvent(sel, ev)
			if !ok {
				continue
			}
			if err := ew.write(typ, ev.Object); err != nil {
				return
			}
		}
		if evs == nil { // woken by the ticker
			if !q.h.opts.Clock.Now().Before(deadline) {
				return
			}
			if bookmarks {
				if err := ew.bookmark(w.Cursor(), false); err != nil {
					return
				}
			}
			wake = make(chan struct{})
			go func(wake chan struct{}) {
				defer close(wake)
				select {
				case <-tick.C:
				case <-ctx.Done():
				}
			}(wake)
		}
		flush()
	}
}

// filterEvent maps a store event onto what a selective watcher sees: an object
// entering the selection is ADDED, one leaving it DELETED.
func filterEvent(sel selector, ev storage.Event) (watch.EventType, bool) {
	cur := sel.matches(ev.Object)
	if ev.Type != watch.Modified || sel.empty() {
		return ev.Type, cur
	}
	prev := ev.Prev != nil && sel.matches(ev.Prev)
	switch {
	case cur && prev:
		return watch.Modified, true
	case cur:
		return watch.Added, true
	case prev:
		return watch.Deleted, true
	}
	return "", false
}

// eventWriter writes watch events in the negotiated format.
type eventWriter struct {
	q   *req
	out output
	buf bytes.Buffer
	// table makes each object a one-row Table; only the first carries the
	// column definitions, as upstream.
	table, headersSent bool
}

func (e *eventWriter) write(typ watch.EventType, o *storage.Object) error {
	if e.out.rawJSON() && e.q.res.Converter == nil && !e.table {
		e.buf.Reset()
		fmt.Fprintf(&e.buf, `{"type":%q,"object":`, typ)
		e.buf.Write(bytes.TrimRight(o.Raw, "\n"))
		e.buf.WriteString("}\n")
		_, err := e.q.w.Write(e.buf.Bytes())
		return err
	}
	obj, err := e.q.h.store.Decode(o)
	if err == nil {
		obj, err = e.q.served(obj)
	}
	if err != nil {
		return err
	}
	if e.table {
		tbl, err := e.q.table([]runtime.Object{obj}, strconv.FormatUint(o.RV, 10), "", !e.headersSent)
		if err != nil {
			return err
		}
		e.headersSent = true
		return e.writeTyped(typ, tbl)
	}
	return e.writeTyped(typ, obj)
}

func (e *eventWriter) bookmark(rv uint64, initialEnd bool) error {
	obj := e.q.res.New()
	acc, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	acc.SetResourceVersion(strconv.FormatUint(rv, 10))
	if initialEnd {
		acc.SetAnnotations(map[string]string{InitialEventsEndAnnotation: "true"})
	}
	return e.writeTyped(watch.Bookmark, obj)
}

func (e *eventWriter) writeTyped(typ watch.EventType, obj runtime.Object) error {
	gv := e.q.res.GroupVersion()
	switch obj.(type) {
	case *metav1.Status, *metav1.Table:
		gv = metav1.SchemeGroupVersion
	}
	var raw bytes.Buffer
	if err := codecs.EncoderForVersion(e.out.info.Serializer, gv).Encode(obj, &raw); err != nil {
		return err
	}
	ev := &metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw.Bytes()}}
	if e.out.mediaType == mediaProtobuf {
		s := e.out.info.StreamSerializer
		fw := s.Framer.NewFrameWriter(e.q.w)
		var b bytes.Buffer
		if err := s.Serializer.Encode(ev, &b); err != nil {
			return err
		}
		_, err := fw.Write(b.Bytes())
		return err
	}
	e.buf.Reset()
	fmt.Fprintf(&e.buf, `{"type":%q,"object":`, typ)
	e.buf.Write(bytes.TrimRight(raw.Bytes(), "\n"))
	e.buf.WriteString("}\n")
	_, err := e.q.w.Write(e.buf.Bytes())
	return err
}

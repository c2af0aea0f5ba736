package storage

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// A stored object that does not decode fails closed, as kube-apiserver's does: it stays in the store, and
// every read that would include it fails with an error naming its key (a GET of it, a list or a watch of its
// resource) rather than answer without it: a list without it would make a kubelet stop the pod as an orphan,
// and a controller delete what it owns. Writes of its key fail the same way. An admin removes it with the
// delete option ignoreStoreReadErrorWithClusterBreakingPotential (kubectl delete
// --ignore-store-read-error-with-cluster-breaking-potential=true; upstream's AllowUnsafeMalformedObjectDeletion).

// RemoveHint says how a corrupt object is removed.
const RemoveHint = "an admin removes it with kubectl delete --ignore-store-read-error-with-cluster-breaking-potential=true, " +
	"or the delete option ignoreStoreReadErrorWithClusterBreakingPotential"

// ErrNotCorrupt is returned by DeleteCorrupt for a key whose object decodes.
var ErrNotCorrupt = errors.New("the object is not corrupt")

// CorruptError is the error of a read or write of one stored object that does not decode. As an API status
// it is upstream's for a GET of a corrupt object: 500, reason InternalError, naming the key.
type CorruptError struct {
	Key string
	Err error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("StorageError: corrupt object, Code: 7, Key: %s, ResourceVersion: 0, AdditionalErrorMsg: "+
		"object not decodable: %v (%s)", e.Key, e.Err, RemoveHint)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Status makes the error an API status (apierrors.APIStatus).
func (e *CorruptError) Status() metav1.Status {
	return metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonInternalError,
		Message: "Internal error occurred: " + e.Error(),
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: e.Error()}}},
	}
}

// ReadError is the error of a list or watch whose span holds corrupt objects. As an API status it is
// upstream's: 500, reason StorageReadError, one cause per key; its message names the keys too, since kubectl
// prints only the message.
type ReadError struct {
	Resource schema.GroupResource
	Corrupt  []*CorruptError // sorted by key
}

func (e *ReadError) Error() string {
	keys := make([]string, len(e.Corrupt))
	for i, c := range e.Corrupt {
		keys[i] = c.Key
	}
	return fmt.Sprintf("failed to read one or more %s from the storage: corrupt object(s) %s (%s)",
		e.Resource.String(), strings.Join(keys, ", "), RemoveHint)
}

// Status makes the error an API status (apierrors.APIStatus).
func (e *ReadError) Status() metav1.Status {
	causes := make([]metav1.StatusCause, len(e.Corrupt))
	for i, c := range e.Corrupt {
		causes[i] = metav1.StatusCause{Type: metav1.CauseTypeUnexpectedServerResponse, Field: c.Key, Message: c.Error()}
	}
	return metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonStoreReadError,
		Message: e.Error(),
		Details: &metav1.StatusDetails{Group: e.Resource.Group, Kind: e.Resource.Resource, Name: "list", Causes: causes},
	}
}

// CorruptIn returns the corrupt objects of the keys in span, sorted by key; none in the common case, cheaply.
func (s *Store) CorruptIn(span Span) []*CorruptError {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.corrupt == 0 {
		return nil
	}
	var out []*CorruptError
	if span.Exact {
		if o := s.committed[ResourceOf(span.Prefix)][span.Prefix]; o != nil && o.Corrupt != nil {
			out = append(out, o.Corrupt)
		}
		return out
	}
	for k, o := range s.committed[ResourceOf(span.Prefix)] {
		if o.Corrupt != nil && strings.HasPrefix(k, span.Prefix) {
			out = append(out, o.Corrupt)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// DeleteCorrupt removes the corrupt object at key, which no ordinary write can (they fail to decode it). Its
// watchers see a deletion of tombstone, a new object of the key's kind naming it (the store gives it the
// deletion's resourceVersion), since the last state cannot be decoded. It returns the stored tombstone, nil
// when the key is absent, or ErrNotCorrupt when its object decodes.
func (s *Store) DeleteCorrupt(key string, tombstone runtime.Object) (*Object, error) {
	acc, err := meta.Accessor(tombstone)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	cur := s.latest[key]
	switch {
	case cur == nil:
		s.mu.Unlock()
		return nil, nil
	case cur.Corrupt == nil:
		s.mu.Unlock()
		return nil, ErrNotCorrupt
	}
	if err := s.writable(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	rv := s.rv + 1
	acc.SetResourceVersion(strconv.FormatUint(rv, 10))
	raw, err := s.codec.Encode(tombstone)
	if err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("encode %s: %w", key, err)
	}
	lbls, flds := s.codec.Index(key, tombstone)
	s.rv = rv
	o := &Object{Key: key, RV: rv, Raw: raw, Labels: lbls, Fields: flds, Stored: s.opts.Now()}
	delete(s.latest, key)
	p := &pendingWrite{ev: Event{Type: watch.Deleted, Object: o, Prev: cur}, done: make(chan error, 1)}
	s.queue = append(s.queue, p)
	s.mu.Unlock()
	s.wake()
	if err := <-p.done; err != nil {
		return nil, err
	}
	return o, nil
}

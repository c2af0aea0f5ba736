package storage

import (
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// Codec converts between typed objects and their stored form. It is supplied by
// the caller and must be safe for concurrent use.
type Codec interface {
	// Decode returns a new typed object for raw, stored under key.
	Decode(key string, raw []byte) (runtime.Object, error)
	// Encode returns the stored (JSON) form of obj.
	Encode(obj runtime.Object) ([]byte, error)
	// Index returns the labels and selectable fields of obj, stored under key.
	Index(key string, obj runtime.Object) (labels.Set, fields.Set)
}

// Object is one stored object. It is immutable once returned by the store:
// callers must not modify Raw, Labels or Fields.
type Object struct {
	Key    string
	RV     uint64
	Raw    []byte
	Labels labels.Set
	Fields fields.Set
	// Stored is when this process stored this state (Options.Now); zero for an object read from the file
	// when the store was opened.
	Stored time.Time
	// Corrupt is set, and RV, Labels and Fields are not, for a stored object that does not decode.
	Corrupt *CorruptError
}

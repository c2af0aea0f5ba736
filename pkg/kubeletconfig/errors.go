package kubeletconfig

import (
	"errors"
	"fmt"
	"strings"
)

// The classes of a *FieldError, checked with errors.Is.
var (
	// ErrUnknownField: the field is not one of the kind's (a typo, or a field of another version).
	ErrUnknownField = errors.New("unknown field")
	// ErrNotSupported: a KubeletConfiguration field this kubelet does not honour.
	ErrNotSupported = errors.New("not supported by this kubelet")
	// ErrFixedValue: a field this kubelet has one value for, written with another.
	ErrFixedValue = errors.New("fixed by this kubelet")
	// ErrWrongType: a value of the wrong JSON type (a string for a number).
	ErrWrongType = errors.New("wrong type")
	// ErrWrongKind: apiVersion or kind is not the one expected.
	ErrWrongKind = errors.New("wrong apiVersion or kind")
)

// FieldError is a field of a configuration document that cannot be taken. Path is the field's dotted path
// in the document ("authentication.anonymous.enabled"); Class is one of the Err classes above.
type FieldError struct {
	Path  string
	Class error
	// Detail is what is wrong, worded for the user (empty for ErrUnknownField and ErrNotSupported).
	Detail string
}

func (e *FieldError) Error() string {
	switch {
	case errors.Is(e.Class, ErrUnknownField):
		// Worded as encoding/json words it, after the path of the object holding the field, if any.
		parent, name := "", e.Path
		if i := strings.LastIndex(e.Path, "."); i >= 0 {
			parent, name = e.Path[:i], e.Path[i+1:]
		}
		if parent == "" {
			return fmt.Sprintf("unknown field %q", name)
		}
		return fmt.Sprintf("%s: unknown field %q", parent, name)
	case e.Detail == "":
		return e.Path + ": " + e.Class.Error()
	default:
		return e.Path + ": " + e.Detail
	}
}

// Unwrap returns the error's class.
func (e *FieldError) Unwrap() error { return e.Class }

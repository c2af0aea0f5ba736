package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/nodeagent/kubelet/pkg/apiserver/limits"
)

func parsePatchType(ct string) (types.PatchType, error) {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", unsupportedMediaType(ct)
	}
	switch pt := types.PatchType(mt); pt {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyYAMLPatchType:
		return pt, nil
	}
	return "", unsupportedMediaType(ct)
}

// applyPatch applies a patch to the served form of cur and returns the stored
// form of the result.
func (q *req) applyPatch(cur runtime.Object, pt types.PatchType, patch []byte) (runtime.Object, []string, error) {
	served, err := q.served(cur)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	served.GetObjectKind().SetGroupVersionKind(q.res.GVK())
	original, err := json.Marshal(served)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	patched, err := patchJSON(pt, original, patch, q.res.New())
	if err != nil {
		var st apierrors.APIStatus
		if !errors.As(err, &st) {
			// 422 as upstream, keeping the reason (upstream's generic response drops it).
			return nil, nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure,
				Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid, Message: err.Error(),
				Details: &metav1.StatusDetails{Group: q.res.Group, Kind: q.res.Name, Name: q.info.Name}}}
		}
		return nil, nil, err
	}
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaJSON)
	obj, warnings, err := decodeWith(info, q.r.URL.Query().Get("fieldValidation"), q.res.GVK(), q.res.New(), patched)
	if err != nil {
		return nil, nil, err
	}
	stored, err := q.toStorage(obj)
	return stored, warnings, err
}

// patchJSON applies a patch of type pt (JSON, merge or strategic merge) to
// the JSON document original, whose Go type is that of schema, within
// kube-apiserver's bounds: at most limits.MaxJSONPatchOperations operations
// (413 beyond), and copies adding at most limits.JSONPatchMaxCopyBytes. It
// returns the patched document, an API error (400 for a patch that does not
// parse, 413 for one of too many operations), or a plain error for a JSON
// patch that does not apply (422 for the caller).
func patchJSON(pt types.PatchType, original, patch []byte, schema runtime.Object) (out []byte, retErr error) {
	defer func() {
		// The patch libraries have panicked on malformed patches (json-patch on a root replace without a
		// value); a patch is the client's input, so whatever slips past the checks below is its error.
		if r := recover(); r != nil {
			out, retErr = nil, apierrors.NewBadRequest(fmt.Sprintf("the %s patch could not be applied: %v", patchName(pt), r))
		}
	}()
	switch pt {
	case types.JSONPatchType:
		limits.BoundJSONPatchCopies(limits.JSONPatchMaxCopyBytes)
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid JSON patch: %v", err))
		}
		if len(p) > limits.MaxJSONPatchOperations {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
				"The allowed maximum operations in a JSON patch is %d, got %d", limits.MaxJSONPatchOperations, len(p)))
		}
		if err := checkOperations(p); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid JSON patch: %v", err))
		}
		patched, err := p.Apply(original)
		if err != nil {
			return nil, fmt.Errorf("the JSON patch could not be applied: %w", err)
		}
		return patched, nil
	case types.MergePatchType:
		patched, err := jsonpatch.MergePatch(original, patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid merge patch: %v", err))
		}
		return patched, nil
	case types.StrategicMergePatchType:
		patched, err := strategicpatch.StrategicMergePatch(original, patch, schema)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid strategic merge patch: %v", err))
		}
		return patched, nil
	}
	return nil, unsupportedMediaType(string(pt))
}

// checkOperations refuses JSON patch operations that RFC 6902 makes invalid
// and the library does not refuse itself: an add, replace or test without a
// value, a move or copy without a source. (An explicit null value is a
// value, but not for the whole document.)
func checkOperations(p jsonpatch.Patch) error {
	for i, op := range p {
		kind := op.Kind()
		path, err := op.Path()
		if err != nil {
			return fmt.Errorf("operation %d: %w", i, err)
		}
		switch kind {
		case "add", "replace", "test":
			v, ok := op["value"]
			if !ok {
				return fmt.Errorf("operation %d (%s %q): missing value", i, kind, path)
			}
			if path == "" && (v == nil || string(*v) == "null") {
				return fmt.Errorf("operation %d (%s of the whole document): the value must be an object or array", i, kind)
			}
		case "move", "copy":
			if _, err := op.From(); err != nil {
				return fmt.Errorf("operation %d (%s %q): %w", i, kind, path, err)
			}
		}
	}
	return nil
}

// patchName words a patch type for messages.
func patchName(pt types.PatchType) string {
	switch pt {
	case types.JSONPatchType:
		return "JSON"
	case types.MergePatchType:
		return "merge"
	case types.StrategicMergePatchType:
		return "strategic merge"
	}
	return string(pt)
}

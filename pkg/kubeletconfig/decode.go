package kubeletconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsjson "sigs.k8s.io/json"
)

// DecodeStrict decodes the JSON document doc into v, matching field names case-sensitively as the API
// server does. An unknown field or a value of the wrong JSON type is a *FieldError naming the field; other
// errors (a malformed duration or quantity) are returned as the decoder words them.
func DecodeStrict(doc []byte, v any) error {
	strict, err := sigsjson.UnmarshalStrict(doc, v, sigsjson.DisallowUnknownFields)
	if err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return &FieldError{Path: typeErr.Field, Class: ErrWrongType, Detail: "cannot be " + typeErr.Value}
		}
		return err
	}
	for _, e := range strict { // with DisallowUnknownFields alone, every strict error is an unknown field
		var fe sigsjson.FieldError
		if errors.As(e, &fe) {
			return &FieldError{Path: fe.FieldPath(), Class: ErrUnknownField}
		}
		return e
	}
	return nil
}

// CheckKind checks a document's apiVersion and kind; a mismatch is a *FieldError of class ErrWrongKind.
func CheckKind(doc []byte, apiVersion, kind string) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(doc, &meta); err != nil {
		return err
	}
	if meta.APIVersion != apiVersion {
		return &FieldError{Path: "apiVersion", Class: ErrWrongKind, Detail: fmt.Sprintf("%q, want %q", meta.APIVersion, apiVersion)}
	}
	if meta.Kind != kind {
		return &FieldError{Path: "kind", Class: ErrWrongKind, Detail: fmt.Sprintf("%q, want %q", meta.Kind, kind)}
	}
	return nil
}

// Decode decodes a KubeletConfiguration strictly and returns it with the dotted paths of the honoured
// fields the document sets, sorted. honoured says which fields the caller honours (their value may be an
// object or a list). A field of the kind that is neither honoured nor fixed (see fixedFields) is an
// ErrNotSupported *FieldError; a fixed field written with another value than this kubelet's is an
// ErrFixedValue one.
func Decode(doc []byte, honoured func(path string) bool) (*kubeletv1beta1.KubeletConfiguration, []string, error) {
	if err := CheckKind(doc, kubeletv1beta1.SchemeGroupVersion.String(), "KubeletConfiguration"); err != nil {
		return nil, nil, err
	}
	var generic map[string]any
	if err := json.Unmarshal(doc, &generic); err != nil {
		return nil, nil, err
	}
	var cfg kubeletv1beta1.KubeletConfiguration
	if err := DecodeStrict(doc, &cfg); err != nil {
		return nil, nil, err
	}
	known := func(path string) bool { return honoured(path) || fixedFields[path] != nil }
	var set []string
	for _, path := range leafPaths("", generic, known) {
		switch {
		case path == "apiVersion" || path == "kind":
		case honoured(path):
			set = append(set, path)
		case fixedFields[path] != nil:
			if ok, want := fixedFields[path](&cfg); !ok {
				return nil, nil, &FieldError{Path: path, Class: ErrFixedValue, Detail: "this kubelet supports only " + want}
			}
		default:
			return nil, nil, &FieldError{Path: path, Class: ErrNotSupported}
		}
	}
	return &cfg, set, nil
}

// fixedFields may be written in the file with the one value this kubelet has: their check says whether the
// value is that one, and names it.
var fixedFields = map[string]func(c *kubeletv1beta1.KubeletConfiguration) (bool, string){
	"enableServer":  func(c *kubeletv1beta1.KubeletConfiguration) (bool, string) { return deref(c.EnableServer), "true" },
	"cgroupsPerQOS": func(c *kubeletv1beta1.KubeletConfiguration) (bool, string) { return deref(c.CgroupsPerQOS), "true" },
	"readOnlyPort":  func(c *kubeletv1beta1.KubeletConfiguration) (bool, string) { return c.ReadOnlyPort == 0, "0" },
	"healthzBindAddress": func(c *kubeletv1beta1.KubeletConfiguration) (bool, string) {
		return c.HealthzBindAddress == "127.0.0.1", "127.0.0.1"
	},
	"serializeImagePulls": func(c *kubeletv1beta1.KubeletConfiguration) (bool, string) {
		return !deref(c.SerializeImagePulls), "false"
	},
	"authentication.anonymous.enabled": func(c *kubeletv1beta1.KubeletConfiguration) (bool, string) {
		return !deref(c.Authentication.Anonymous.Enabled), "false"
	},
	"authentication.webhook.enabled": func(c *kubeletv1beta1.KubeletConfiguration) (bool, string) {
		return deref(c.Authentication.Webhook.Enabled), "true"
	},
	"authentication.webhook.cacheTTL": func(*kubeletv1beta1.KubeletConfiguration) (bool, string) { return true, "" },
	"authorization.mode": func(c *kubeletv1beta1.KubeletConfiguration) (bool, string) {
		return c.Authorization.Mode == "Webhook", "Webhook"
	},
	"authorization.webhook.cacheAuthorizedTTL":   func(*kubeletv1beta1.KubeletConfiguration) (bool, string) { return true, "" },
	"authorization.webhook.cacheUnauthorizedTTL": func(*kubeletv1beta1.KubeletConfiguration) (bool, string) { return true, "" },
}

// leafPaths lists the dotted paths of a JSON document's fields, stopping at the fields known says it knows
// (whose values may be objects or lists).
func leafPaths(prefix string, m map[string]any, known func(string) bool) []string {
	var out []string
	for k, v := range m {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		child, isObject := v.(map[string]any)
		if !isObject || known(path) {
			out = append(out, path)
			continue
		}
		if len(child) == 0 {
			continue
		}
		out = append(out, leafPaths(path, child, known)...)
	}
	sort.Strings(out)
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

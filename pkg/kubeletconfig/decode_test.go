package kubeletconfig

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// honoured is a small set of honoured fields, as a caller gives it.
func honoured(path string) bool {
	return slices.Contains([]string{"maxPods", "syncFrequency", "evictionHard", "registerWithTaints", "authentication.x509.clientCAFile"}, path)
}

func decode(t *testing.T, file string) ([]string, error) {
	t.Helper()
	doc, err := yaml.YAMLToJSON([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	cfg, set, err := Decode(doc, honoured)
	if err == nil && cfg == nil {
		t.Fatal("no configuration and no error")
	}
	return set, err
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		set        []string
	}{
		{"empty", header, nil},
		{"honoured", header + "maxPods: 10\nsyncFrequency: 30s\n", []string{"maxPods", "syncFrequency"}},
		{"object value kept whole", header + "evictionHard: {memory.available: 100Mi}\n", []string{"evictionHard"}},
		{"empty object value", header + "evictionHard: {}\n", []string{"evictionHard"}},
		{"list value", header + "registerWithTaints: [{key: a, effect: NoSchedule}]\n", []string{"registerWithTaints"}},
		{"nested", header + "authentication: {x509: {clientCAFile: /ca.crt}}\n", []string{"authentication.x509.clientCAFile"}},
		{"fixed field with its value", header + "readOnlyPort: 0\nenableServer: true\nauthorization: {mode: Webhook}\n", nil},
		{"fixed field of any value", header + "authentication: {webhook: {cacheTTL: 2m}}\n", nil},
		{"empty object not set", header + "authentication: {}\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := decode(t, tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(set, tc.set) {
				t.Errorf("set %v, want %v", set, tc.set)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		class      error  // nil: not a *FieldError
		path       string // the *FieldError's Path
		msg        string
	}{
		{"typo", header + "maxPod: 10\n", ErrUnknownField, "maxPod", `unknown field "maxPod"`},
		{"nested typo", header + "authentication: {x509: {clientCAFile: /x}, other: 1}\n", ErrUnknownField, "authentication.other",
			`authentication: unknown field "other"`},
		{"case differs", header + "MaxPods: 10\n", ErrUnknownField, "MaxPods", `unknown field "MaxPods"`},
		{"not honoured", header + "imageServiceEndpoint: unix:///run/x.sock\n", ErrNotSupported, "imageServiceEndpoint",
			"imageServiceEndpoint: not supported by this kubelet"},
		{"not honoured nested", header + "authentication: {webhook: {enabled: true}, x509: {clientCAFile: /x}}\nlogging: {format: json}\n",
			ErrNotSupported, "logging.format", "logging.format: not supported by this kubelet"},
		{"fixed field, other value", header + "readOnlyPort: 10255\n", ErrFixedValue, "readOnlyPort", "readOnlyPort: this kubelet supports only 0"},
		{"fixed nested", header + "authentication: {anonymous: {enabled: true}}\n", ErrFixedValue, "authentication.anonymous.enabled",
			"authentication.anonymous.enabled: this kubelet supports only false"},
		{"wrong type", header + "maxPods: many\n", ErrWrongType, "maxPods", "maxPods: cannot be string"},
		{"wrong type nested", header + "authentication: {x509: {clientCAFile: 3}}\n", ErrWrongType, "authentication.x509.clientCAFile",
			"authentication.x509.clientCAFile: cannot be number"},
		{"wrong kind", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n", ErrWrongKind, "kind", `kind: "Pod", want "KubeletConfiguration"`},
		{"wrong version", "apiVersion: v1\nkind: KubeletConfiguration\n", ErrWrongKind, "apiVersion",
			`apiVersion: "v1", want "kubelet.config.k8s.io/v1beta1"`},
		{"bad duration", header + "syncFrequency: soon\n", nil, "", `"soon"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decode(t, tc.file)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want one saying %q", err, tc.msg)
			}
			var fe *FieldError
			switch {
			case tc.class == nil && errors.As(err, &fe):
				t.Errorf("error %v is a field error of class %v", err, fe.Class)
			case tc.class == nil:
			case !errors.Is(err, tc.class):
				t.Errorf("error %v is not of class %v", err, tc.class)
			case !errors.As(err, &fe) || fe.Path != tc.path:
				t.Errorf("error %v names field %q, want %q", err, fe.Path, tc.path)
			}
		})
	}
}

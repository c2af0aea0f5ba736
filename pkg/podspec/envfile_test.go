package podspec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestEnvFileValue(t *testing.T) {
	const file = `# settings written by the init container
  CONFIG_MAIN='hello'
EMPTY= 'ignored'
MULTI='line one
line two' # a comment
SPACED='a b  c'
CONFIG_MAIN='second'
`
	for _, tc := range []struct {
		key, want string
		found     bool
	}{
		{"CONFIG_MAIN", "hello", true}, // the first definition
		{"EMPTY", "", true},
		{"MULTI", "line one\nline two", true},
		{"SPACED", "a b  c", true},
		{"MISSING", "", false},
	} {
		v, found, err := EnvFileValue(strings.NewReader(file), tc.key)
		if err != nil || v != tc.want || found != tc.found {
			t.Errorf("%s: %q %v %v, want %q %v", tc.key, v, found, err, tc.want, tc.found)
		}
	}
	for name, bad := range map[string]string{
		"no equals":           "JUST_A_NAME\n",
		"no name":             "='x'\n",
		"blank before equals": "KEY ='x'\n",
		"unquoted":            "KEY=value\n",
		"double quotes":       `KEY="value"` + "\n",
		"after the quote":     "KEY='a' b\n",
		"unclosed":            "KEY='a\nb\n",
	} {
		if _, _, err := EnvFileValue(strings.NewReader(bad), "KEY"); err == nil {
			t.Errorf("%s: accepted %q", name, bad)
		}
	}
}

func TestEnvFromFileKeyRef(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "app.env"), []byte("GREETING='hello'\nEMPTY=''\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A link out of the volume is followed inside it, never to the host's file.
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "escape.env")); err != nil {
		t.Fatal(err)
	}
	ref := func(vol, path, key string, opt bool) v1.EnvVar {
		return v1.EnvVar{Name: "V", ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: vol, Path: path, Key: key, Optional: &opt}}}
	}
	src := EnvSources{VolumePath: func(name string) (string, bool) { return dir, name == "config" }}
	for _, tc := range []struct {
		name    string
		env     v1.EnvVar
		want    string // "" with wantErr empty: the variable is not set
		wantErr string
	}{
		{"a key", ref("config", "sub/app.env", "GREETING", false), "hello", ""},
		{"a missing key", ref("config", "sub/app.env", "NOPE", false), "", `environment variable key "NOPE" not found in file "sub/app.env"`},
		{"an empty value is missing", ref("config", "sub/app.env", "EMPTY", false), "", "not found"},
		{"optional and missing", ref("config", "sub/app.env", "NOPE", true), "", ""},
		{"a missing file", ref("config", "none.env", "GREETING", false), "", "couldn't parse env file"},
		{"an unknown volume", ref("other", "sub/app.env", "GREETING", false), "", `cannot find the volume "other" referenced by FileKeyRef`},
		{"a link out of the volume", ref("config", "escape.env", "root", false), "", "couldn't parse env file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Env: []v1.EnvVar{tc.env}}}}}
			got, err := Env(pod, &pod.Spec.Containers[0], src)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrConfigRef) {
					t.Fatalf("err %v, want %q (a config error the container waits on)", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && len(got) != 0 || tc.want != "" && (len(got) != 1 || got[0].Value != tc.want) {
				t.Errorf("env %v, want %q", got, tc.want)
			}
		})
	}
}

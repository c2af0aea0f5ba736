package kubeletconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string            // "" for no --config
		dropIns map[string]string // nil for no --config-dir
		want    map[string]any    // the merged document's fields, besides apiVersion and kind
		sources []string          // the base names of the files merged, in order
	}{
		{"file alone", header + "maxPods: 50\n", nil, map[string]any{"maxPods": 50.0}, []string{"kubelet.yaml"}},
		{"drop-ins in lexical order", header + "maxPods: 50\nsyncFrequency: 1m\n",
			map[string]string{"20-later.conf": "maxPods: 70\n", "10-pool.conf": "maxPods: 60\nsyncFrequency: 20s\n"},
			map[string]any{"maxPods": 70.0, "syncFrequency": "20s"}, []string{"kubelet.yaml", "10-pool.conf", "20-later.conf"}},
		{"only *.conf", header, map[string]string{"10-a.conf": "maxPods: 60\n", "README": "maxPods: 1\n"},
			map[string]any{"maxPods": 60.0}, []string{"kubelet.yaml", "10-a.conf"}},
		{"drop-in replaces an object field by field", header + "evictionHard: {memory.available: 100Mi, nodefs.available: 10%}\n",
			map[string]string{"10-a.conf": "evictionHard: {memory.available: 200Mi}\n"},
			map[string]any{"evictionHard": map[string]any{"memory.available": "200Mi", "nodefs.available": "10%"}},
			[]string{"kubelet.yaml", "10-a.conf"}},
		{"drop-ins alone", "", map[string]string{"10-a.conf": header + "maxPods: 60\n"}, map[string]any{"maxPods": 60.0},
			[]string{"10-a.conf"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file, dir := write(t, tc.file, tc.dropIns)
			doc, sources, err := Merge(file, dir)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(doc, &got); err != nil {
				t.Fatal(err)
			}
			delete(got, "apiVersion")
			delete(got, "kind")
			if g, w := mustJSON(t, got), mustJSON(t, tc.want); g != w {
				t.Errorf("merged %s, want %s", g, w)
			}
			var names []string
			for _, s := range strings.Fields(sources) {
				names = append(names, filepath.Base(s))
			}
			if strings.Join(names, " ") != strings.Join(tc.sources, " ") {
				t.Errorf("sources %v, want %v", names, tc.sources)
			}
		})
	}
}

func TestMergeErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file, dir, want string
	}{
		{"no file", filepath.Join(dir, "missing.yaml"), "", "--config: "},
		{"not yaml", write1(t, dir, "bad.yaml", header+"maxPods: [\n"), "", "kubelet config " + filepath.Join(dir, "bad.yaml")},
		{"drop-in not yaml", "", dropInDir(t, map[string]string{"10-bad.conf": "a: [\n"}), "10-bad.conf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := Merge(tc.file, tc.dir); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	if doc, sources, err := Merge("", ""); doc != nil || sources != "" || err != nil {
		t.Errorf("no file: %s %q %v", doc, sources, err)
	}
}

// write writes the file (if not empty) and the drop-ins (if not nil) and returns their paths.
func write(t *testing.T, file string, dropIns map[string]string) (string, string) {
	t.Helper()
	var path, dir string
	if file != "" {
		path = write1(t, t.TempDir(), "kubelet.yaml", file)
	}
	if dropIns != nil {
		dir = dropInDir(t, dropIns)
	}
	return path, dir
}

func dropInDir(t *testing.T, dropIns map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range dropIns {
		write1(t, dir, name, content)
	}
	return dir
}

func write1(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

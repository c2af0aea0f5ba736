package cni

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRenderTemplate(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "template")
	conf := filepath.Join(dir, "net.d")
	write := func(s string) {
		if err := os.WriteFile(tmpl, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"subnet": "{{.PodCIDR}}", "ranges": [{{range $i, $r := .PodCIDRRanges}}{{if $i}},{{end}}"{{$r}}"{{end}}], "routes": "{{join .Routes}}"}`)
	if _, err := RenderTemplate(tmpl, conf, "10.244.1.0/24"); err == nil || !strings.Contains(err.Error(), tmpl) {
		t.Fatalf("a template calling an unknown function: %v, want an error naming it", err)
	}
	write(`{"subnet": "{{.PodCIDR}}", "ranges": [{{range $i, $r := .PodCIDRRanges}}{{if $i}},{{end}}"{{$r}}"{{end}}], "routes": {{len .Routes}}}`)
	changed, err := RenderTemplate(tmpl, conf, "10.244.1.0/24, fd00::/64")
	if err != nil || !changed {
		t.Fatal(changed, err)
	}
	got, _ := os.ReadFile(filepath.Join(conf, TemplateFile))
	if want := `{"subnet": "10.244.1.0/24", "ranges": ["10.244.1.0/24","fd00::/64"], "routes": 2}`; string(got) != want {
		t.Fatalf("rendered %s, want %s", got, want)
	}
	if changed, err := RenderTemplate(tmpl, conf, "10.244.1.0/24,fd00::/64"); err != nil || changed {
		t.Fatalf("the same CIDRs again: changed %v, %v", changed, err)
	}
	for _, bad := range []string{"", "10.244.1.0", "10.244.1.0/24,nonsense"} {
		if _, err := RenderTemplate(tmpl, conf, bad); err == nil {
			t.Errorf("pod CIDRs %q accepted", bad)
		}
	}
	write(`{{.Missing}}`)
	if _, err := RenderTemplate(tmpl, conf, "10.244.2.0/24"); err == nil {
		t.Fatal("a template naming a missing field rendered")
	}
	if got2, _ := os.ReadFile(filepath.Join(conf, TemplateFile)); string(got2) != string(got) {
		t.Fatal("a failed render changed the configuration")
	}
}

package imagecreds

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// bufferedContext returns a context whose logger keeps what is logged, and a function listing the errors
// logged so far.
func bufferedContext(t *testing.T) (context.Context, func() []ktesting.LogEntry) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	buffer := logger.GetSink().(ktesting.Underlier).GetBuffer()
	return klog.NewContext(context.Background(), logger), func() []ktesting.LogEntry {
		var out []ktesting.LogEntry
		for _, e := range buffer.Data() {
			if e.Type == ktesting.LogError {
				out = append(out, e)
			}
		}
		return out
	}
}

// loggedPaths lists the "path" value of each entry.
func loggedPaths(entries []ktesting.LogEntry) []string {
	var out []string
	for _, e := range entries {
		for i := 0; i+1 < len(e.ParameterKVList); i += 2 {
			if e.ParameterKVList[i] == "path" {
				out = append(out, fmt.Sprint(e.ParameterKVList[i+1]))
			}
		}
	}
	return out
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func configJSON(user string) string {
	return `{"auths": {"registry.example.com": {"username": "` + user + `"}}}`
}

func dockercfg(user string) string {
	return `{"registry.example.com": {"username": "` + user + `"}}`
}

func TestDockerConfigFileSearchOrder(t *testing.T) {
	// Four JSON directories and four legacy ones, as upstream's root dir, working dir, $HOME(/.docker), /(.docker).
	type file struct{ dir, name, content string }
	for _, tt := range []struct {
		name      string
		files     []file
		want      string // the user of the file read; "" for none
		badLogged []string
	}{
		{"nothing", nil, "", nil},
		{"root dir config.json first", []file{{"j0", configJSONName, configJSON("root")}, {"j1", configJSONName, configJSON("wd")}}, "root", nil},
		{"home config.json before /.docker", []file{{"j2", configJSONName, configJSON("home")}, {"j3", configJSONName, configJSON("slash")}}, "home", nil},
		{"last config.json", []file{{"j3", configJSONName, configJSON("slash")}}, "slash", nil},
		{"config.json before any .dockercfg", []file{{"l0", dockercfgName, dockercfg("legacy-root")}, {"j3", configJSONName, configJSON("slash")}}, "slash", nil},
		{"legacy when no config.json", []file{{"l1", dockercfgName, dockercfg("legacy-wd")}, {"l2", dockercfgName, dockercfg("legacy-home")}}, "legacy-wd", nil},
		{"a config.json that does not parse is skipped, named once", []file{{"j0", configJSONName, "{not json"}, {"j2", configJSONName, configJSON("home")}}, "home", []string{"j0/config.json"}},
		{"an auth that does not decode skips the file", []file{{"j1", configJSONName, `{"auths": {"r.io": {"auth": "!"}}}`}, {"l0", dockercfgName, dockercfg("legacy-root")}}, "legacy-root", []string{"j1/config.json"}},
		{"a .dockercfg that does not parse is skipped", []file{{"l0", dockercfgName, "[]"}, {"l3", dockercfgName, dockercfg("legacy-slash")}}, "legacy-slash", []string{"l0/.dockercfg"}},
		{"a config.json without auths is the one used", []file{{"j0", configJSONName, `{"credsStore": "desktop"}`}, {"j1", configJSONName, configJSON("wd")}}, "", nil},
		{"a directory in the way is skipped", []file{{"j0/config.json", "x", "x"}, {"j1", configJSONName, configJSON("wd")}}, "wd", []string{"j0/config.json"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			dirs := DockerConfigDirs{}
			for i := range 4 {
				dirs.JSON = append(dirs.JSON, filepath.Join(base, fmt.Sprintf("j%d", i)))
				dirs.Legacy = append(dirs.Legacy, filepath.Join(base, fmt.Sprintf("l%d", i)))
			}
			for _, f := range tt.files {
				writeFile(t, filepath.Join(base, f.dir, f.name), f.content)
			}
			ctx, logged := bufferedContext(t)
			f := NewDockerConfigFile(dirs, testclock.NewFakePassiveClock(t0))
			got := users(f.Lookup(ctx, "registry.example.com/app"))
			want := []string(nil)
			if tt.want != "" {
				want = []string{tt.want}
			}
			if !slices.Equal(got, want) {
				t.Errorf("credentials of %q, want %q", got, want)
			}
			var wantLogged []string
			for _, p := range tt.badLogged {
				wantLogged = append(wantLogged, filepath.Join(base, p))
			}
			if got := loggedPaths(logged()); !slices.Equal(got, wantLogged) {
				t.Errorf("logged the paths %q, want one line for each of %q", got, wantLogged)
			}
			// Read once: a second lookup neither reads nor logs again.
			f.Lookup(ctx, "registry.example.com/app")
			if len(logged()) != len(wantLogged) {
				t.Errorf("the second lookup logged again: %q", loggedPaths(logged()))
			}
		})
	}
}

func TestDockerConfigFileWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, filepath.Join(dir, configJSONName), configJSON("wd"))
	f := NewDockerConfigFile(DockerConfigDirs{JSON: []string{filepath.Join(dir, "none"), ""}}, testclock.NewFakePassiveClock(t0))
	if got := users(f.Lookup(context.Background(), "registry.example.com/app")); !slices.Equal(got, []string{"wd"}) {
		t.Errorf("credentials of %q, want the working directory's", got)
	}
}

func TestDockerConfigFileReread(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, configJSONName)
	clk := testclock.NewFakePassiveClock(t0)
	f := NewDockerConfigFile(DockerConfigDirs{JSON: []string{dir}}, clk)
	lookup := func() []string { return users(f.Lookup(context.Background(), "registry.example.com/app")) }

	if got := lookup(); got != nil {
		t.Fatalf("no file: %q", got)
	}
	writeFile(t, path, configJSON("v1"))
	clk.SetTime(t0.Add(DockerConfigLifetime - time.Second))
	if got := lookup(); got != nil {
		t.Errorf("a missing file is kept for %v too; read again early: %q", DockerConfigLifetime, got)
	}
	clk.SetTime(t0.Add(DockerConfigLifetime))
	if got := lookup(); !slices.Equal(got, []string{"v1"}) {
		t.Errorf("after %v: %q, want the new file's", DockerConfigLifetime, got)
	}
	read := clk.Now()
	writeFile(t, path, configJSON("v2"))
	clk.SetTime(read.Add(4 * time.Minute))
	if got := lookup(); !slices.Equal(got, []string{"v1"}) {
		t.Errorf("after 4m: %q, want the cached v1", got)
	}
	clk.SetTime(read.Add(5 * time.Minute))
	if got := lookup(); !slices.Equal(got, []string{"v2"}) {
		t.Errorf("after 5m: %q, want v2", got)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(read.Add(10 * time.Minute))
	if got := lookup(); got != nil {
		t.Errorf("file removed: %q", got)
	}
}

func TestDefaultDockerConfigDirs(t *testing.T) {
	t.Setenv("HOME", "/home/kube")
	d := DefaultDockerConfigDirs("/var/lib/kubelet")
	if want := []string{"/var/lib/kubelet", "", "/home/kube/.docker", "/.docker"}; !slices.Equal(d.JSON, want) {
		t.Errorf("config.json dirs %q, want %q", d.JSON, want)
	}
	if want := []string{"/var/lib/kubelet", "", "/home/kube", "/"}; !slices.Equal(d.Legacy, want) {
		t.Errorf(".dockercfg dirs %q, want %q", d.Legacy, want)
	}
}

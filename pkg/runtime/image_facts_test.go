package runtime

import (
	"context"
	"fmt"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	runtimespec "github.com/opencontainers/runtime-spec/specs-go"
)

func TestWithImageProcess(t *testing.T) {
	tests := []struct {
		name string
		cfg  imagespec.ImageConfig
		args string
		env  string
		cwd  string
	}{
		{"entrypoint and cmd", imagespec.ImageConfig{Entrypoint: []string{"/pause"}, Cmd: []string{"-v"}}, "[/pause -v]", "[PATH=/usr/bin]", "/"},
		{"image env replaces and adds", imagespec.ImageConfig{Cmd: []string{"/pause"}, Env: []string{"PATH=/bin", "A=1"}, WorkingDir: "/w"}, "[/pause]", "[PATH=/bin A=1]", "/w"},
	}
	for _, tt := range tests {
		s := &runtimespec.Spec{Process: &runtimespec.Process{Env: []string{"PATH=/usr/bin"}}}
		if err := withImageProcess(tt.cfg)(context.Background(), nil, &containers.Container{}, s); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := fmt.Sprint(s.Process.Args); got != tt.args {
			t.Errorf("%s: args %s, want %s", tt.name, got, tt.args)
		}
		if got := fmt.Sprint(s.Process.Env); got != tt.env {
			t.Errorf("%s: env %s, want %s", tt.name, got, tt.env)
		}
		if s.Process.Cwd != tt.cwd {
			t.Errorf("%s: cwd %s, want %s", tt.name, s.Process.Cwd, tt.cwd)
		}
	}
	var _ oci.SpecOpts = withImageProcess(imagespec.ImageConfig{})
}

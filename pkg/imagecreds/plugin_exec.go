package imagecreds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
)

const (
	// pipeGrace is how long the kubelet waits for a plugin's output once it exited or was killed (a child it
	// left behind may hold its stdout).
	pipeGrace = time.Second
	// stderrTail is the most of a failed plugin's stderr its error carries.
	stderrTail = 512
)

// run executes the plugin once for repo, as upstream: the binary with its args, the kubelet's environment
// followed by the provider's env, a CredentialProviderRequest on stdin, a CredentialProviderResponse of the
// same apiVersion on stdout. The plugin runs in a process group of its own, killed whole when it outlives the
// timeout. Errors name the plugin and the image and never quote stdout, which may hold credentials.
func (p *plugin) run(repo string) (*credentialproviderv1.CredentialProviderResponse, error) {
	req, err := json.Marshal(credentialproviderv1.CredentialProviderRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: p.apiVersion, Kind: "CredentialProviderRequest"},
		Image:    repo,
	})
	if err != nil {
		return nil, p.errorf(repo, "encode request: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.path, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdin = bytes.NewReader(req)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = pipeGrace
	err = cmd.Run()
	switch {
	case ctx.Err() != nil:
		return nil, p.errorf(repo, "no answer within %v, killed", p.timeout)
	case err != nil:
		return nil, p.errorf(repo, "%v%s", err, tail(stderr.String()))
	}
	resp, err := decodeResponse(stdout.Bytes(), p.apiVersion)
	if err != nil {
		return nil, p.errorf(repo, "%v", err)
	}
	return resp, nil
}

// decodeResponse decodes a plugin's stdout strictly: one CredentialProviderResponse object of apiVersion
// (nothing after it), no unknown field. Errors never quote the output.
func decodeResponse(out []byte, apiVersion string) (*credentialproviderv1.CredentialProviderResponse, error) {
	var meta metav1.TypeMeta
	if err := json.Unmarshal(out, &meta); err != nil {
		return nil, errors.New("the answer is not one JSON object")
	}
	if meta.APIVersion != apiVersion {
		return nil, fmt.Errorf("the answer's apiVersion is %.64q, want %q", meta.APIVersion, apiVersion)
	}
	if meta.Kind != "CredentialProviderResponse" {
		return nil, fmt.Errorf("the answer's kind is %.64q, want \"CredentialProviderResponse\"", meta.Kind)
	}
	var resp credentialproviderv1.CredentialProviderResponse
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		return nil, errors.New("the answer does not decode as a CredentialProviderResponse")
	}
	return &resp, nil
}

// tail is the end of a plugin's stderr for its error, on one line.
func tail(stderr string) string {
	s := strings.TrimSpace(stderr)
	if s == "" {
		return ""
	}
	if len(s) > stderrTail {
		s = "..." + s[len(s)-stderrTail:]
	}
	return ": " + strings.Join(strings.Fields(s), " ")
}

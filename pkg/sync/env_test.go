package podsync

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
	"github.com/nodeagent/kubelet/pkg/podspec"
)

func TestMakeEnv(t *testing.T) {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}, Data: map[string]string{"k": "cv", "K2": "x"}}
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "ns"}, Data: map[string][]byte{"pw": []byte("s3cret")}}
	yes := true
	ref := func(name, key string, opt bool) *v1.EnvVarSource {
		return &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: &opt}}
	}
	tests := []struct {
		name    string
		env     []v1.EnvVar
		from    []v1.EnvFromSource
		want    string // KEY=value;...
		wantErr string
	}{
		{name: "plain and expansion", env: []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "$(A)-$(C)-$$(A)"}}, want: "A=1;B=1-$(C)-$(A)"},
		{name: "configmap key", env: []v1.EnvVar{{Name: "X", ValueFrom: ref("cfg", "k", false)}}, want: "X=cv"},
		{name: "missing key", env: []v1.EnvVar{{Name: "X", ValueFrom: ref("cfg", "nope", false)}}, wantErr: "couldn't find key nope in ConfigMap ns/cfg"},
		{name: "missing optional key", env: []v1.EnvVar{{Name: "X", ValueFrom: ref("cfg", "nope", true)}}, want: ""},
		{name: "missing configmap", env: []v1.EnvVar{{Name: "X", ValueFrom: ref("other", "k", false)}}, wantErr: `configmap "other" not found`},
		{
			name: "secret key",
			env: []v1.EnvVar{{Name: "P", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "pw"}}}},
			want: "P=s3cret",
		},
		{
			name: "field refs",
			env: []v1.EnvVar{
				{Name: "N", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				{Name: "H", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
				{Name: "L", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
				{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			},
			want: "N=web;IP=10.88.0.9;H=192.168.1.2;L=frontend;NODE=node1",
		},
		{
			name: "resource refs",
			env: []v1.EnvVar{
				{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
				{Name: "MEM", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "requests.memory", Divisor: resource.MustParse("1Mi")}}},
				{Name: "MCPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1m")}}},
			},
			want: "CPU=1;MEM=64;MCPU=500",
		},
		{
			name: "envFrom with prefix, env wins",
			from: []v1.EnvFromSource{{Prefix: "P_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
			env:  []v1.EnvVar{{Name: "P_k", Value: "override"}},
			want: "P_K2=x;P_k=override",
		},
		{
			name: "envFrom optional missing",
			from: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "none"}, Optional: &yes}}},
			want: "",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, cm, sec)
			pod := newPod("u1", "web", "app")
			pod.Labels = map[string]string{"app": "frontend"}
			c := &pod.Spec.Containers[0]
			c.Env, c.EnvFrom = tc.env, tc.from
			c.Resources = v1.ResourceRequirements{
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")},
				Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
			}
			got, err := h.k.makeEnv(h.ctx, pod, c, []string{"10.88.0.9"}, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, podspec.ErrConfigRef) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := kvString(got); s != tc.want {
				t.Errorf("env %q, want %q", s, tc.want)
			}
		})
	}
}

func kvString(kvs []*runtimeapi.KeyValue) string {
	var parts []string
	for _, kv := range kvs {
		parts = append(parts, kv.Key+"="+kv.Value)
	}
	if len(parts) > 1 && strings.HasPrefix(parts[0], "P_") {
		sortStrings(parts)
	}
	return strings.Join(parts, ";")
}

func TestStaticPodsCannotReadSecrets(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", "web", "app")
	pod.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "P", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "pw"}}}}
	if _, err := h.k.makeEnv(h.ctx, pod, &pod.Spec.Containers[0], nil, nil); err == nil || !strings.Contains(err.Error(), "static pods") {
		t.Fatalf("err %v", err)
	}
}

func TestTerminationMessage(t *testing.T) {
	dir := t.TempDir()
	msgFile := filepath.Join(dir, "msg")
	logFile := filepath.Join(dir, "0.log")
	if err := os.WriteFile(logFile, []byte(
		"2025-01-01T00:00:00Z stdout F first line\n2025-01-01T00:00:01Z stderr P part \n2025-01-01T00:00:01Z stderr F one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := func(code int32, policy v1.TerminationMessagePolicy) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: code, LogPath: logFile,
			Annotations: map[string]string{podfacts.AnnotationTerminationMessageHostPath: msgFile, podfacts.AnnotationTerminationMessagePolicy: string(policy)}}
	}
	c := cs(1, v1.TerminationMessageFallbackToLogsOnError)
	enrichTermination(c)
	if c.Message != "first line\npart one" {
		t.Errorf("fallback message %q", c.Message)
	}
	c = cs(1, v1.TerminationMessageReadFile)
	enrichTermination(c)
	if c.Message != "" {
		t.Errorf("message without fallback %q", c.Message)
	}
	if err := os.WriteFile(msgFile, []byte("written by the app"), 0o644); err != nil {
		t.Fatal(err)
	}
	c = cs(0, v1.TerminationMessageFallbackToLogsOnError)
	enrichTermination(c)
	if c.Message != "written by the app" {
		t.Errorf("file message %q", c.Message)
	}
}

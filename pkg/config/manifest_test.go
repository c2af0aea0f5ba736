package config

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

const goodManifest = `
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: app
    image: localhost/busybox:1.35
    resources:
      limits: {cpu: 100m, memory: 32Mi}
  - name: side
    image: localhost/busybox
`

func TestDecodeManifest(t *testing.T) {
	pod, err := DecodeManifest([]byte(goodManifest), "/etc/manifests/web.yaml", "Node1")
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "web-node1" || pod.Namespace != "default" || pod.Spec.NodeName != "Node1" {
		t.Errorf("identity %s/%s on %s", pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
	if len(pod.UID) != 32 || pod.Annotations[podfacts.AnnotationConfigSource] != SourceFile || pod.Annotations[podfacts.AnnotationConfigHash] != string(pod.UID) {
		t.Errorf("uid %q annotations %v", pod.UID, pod.Annotations)
	}
	c := pod.Spec.Containers
	if c[0].ImagePullPolicy != v1.PullIfNotPresent || c[1].ImagePullPolicy != v1.PullAlways {
		t.Errorf("pull policies %s %s", c[0].ImagePullPolicy, c[1].ImagePullPolicy)
	}
	if c[0].TerminationMessagePath != "/dev/termination-log" || pod.Spec.RestartPolicy != v1.RestartPolicyAlways {
		t.Errorf("defaults not applied: %+v", pod.Spec)
	}
	if q := c[0].Resources.Requests[v1.ResourceMemory]; q.String() != "32Mi" {
		t.Errorf("requests not defaulted from limits: %v", c[0].Resources.Requests)
	}
	if *pod.Spec.TerminationGracePeriodSeconds != 30 || len(pod.Spec.Tolerations) != 1 {
		t.Errorf("grace %v tolerations %v", *pod.Spec.TerminationGracePeriodSeconds, pod.Spec.Tolerations)
	}

	again, _ := DecodeManifest([]byte(goodManifest+"\n"), "/etc/manifests/web.yaml", "Node1")
	if again.UID != pod.UID {
		t.Error("UID changed with formatting only")
	}
	moved, _ := DecodeManifest([]byte(goodManifest), "/etc/manifests/other.yaml", "Node1")
	if moved.UID == pod.UID {
		t.Error("UID does not depend on the file path")
	}
	changed, _ := DecodeManifest([]byte(strings.Replace(goodManifest, "1.35", "1.36", 1)), "/etc/manifests/web.yaml", "Node1")
	if changed.UID == pod.UID {
		t.Error("UID does not depend on the content")
	}
	asJSON := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j","namespace":"kube-system"},"spec":{"containers":[{"name":"c","image":"x:1"}]}}`
	if p, err := DecodeManifest([]byte(asJSON), "/m/j.json", "n"); err != nil || p.Namespace != "kube-system" {
		t.Errorf("JSON manifest: %v %v", p, err)
	}
}

func TestDecodeManifestRejects(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"not yaml", "{{{", "parse manifest"},
		{"not a pod", "apiVersion: v1\nkind: Service\nmetadata: {name: x}", "want v1 Pod"},
		{"no containers", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {}", "at least one container"},
		{"no name", "apiVersion: v1\nkind: Pod\nspec: {containers: [{name: a, image: b}]}", "metadata.name is required"},
		{"bad container name", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: A_B, image: b}]}", "spec.containers[0].name"},
		{"duplicate names", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b}, {name: a, image: b}]}", "duplicate"},
		{"no image", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a}]}", "image is required"},
		{"wrong type", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: 3}", "decode pod"},
		{"huge exponent", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b, resources: {requests: {cpu: 1e-99999999}}}]}", "exponent"},
		{"bad restart policy", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {restartPolicy: Sometimes, containers: [{name: a, image: b}]}", "restartPolicy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeManifest([]byte(tc.data), "/m/f.yaml", "n")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzDecodeManifest checks that no file content makes the decoder panic or hang, and that what it accepts
// is a usable static pod. Run: go test ./pkg/config -run '^$' -fuzz FuzzDecodeManifest -fuzztime 30s
func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(goodManifest))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"x"}]}}`))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b, resources: {limits: {cpu: 1e3}}}], volumes: [{name: v}]}"))
	f.Add([]byte("- a\n- b"))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: &a x\n  labels: *a"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pod, err := DecodeManifest(data, "/m/f.yaml", "node")
		if err != nil {
			return
		}
		if pod.UID == "" || pod.Spec.NodeName != "node" || len(pod.Spec.Containers) == 0 || pod.Namespace == "" {
			t.Fatalf("accepted an unusable pod: %+v", pod)
		}
	})
}

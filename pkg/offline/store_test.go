package offline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// openStore opens the checkpoint of root, written whole before the test's directory is removed.
func openStore(t *testing.T, root string) *Store {
	t.Helper()
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Flush)
	return s
}

func podUsing(uid, secret, configMap, claim string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pod-" + uid, UID: types.UID(uid), ResourceVersion: "1"}}
	p.Spec.Volumes = []v1.Volume{
		{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: secret}}},
		{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: configMap}}}},
		{Name: "d", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
	}
	return p
}

// Pods, objects, tokens and service environments round-trip through files only root can read; a damaged
// pod file or one of a newer version is an error of its own and the other pods are read.
func TestStore(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	if fi, err := os.Stat(s.Dir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("checkpoint directory %v %v", fi, err)
	}
	for _, p := range []*v1.Pod{podUsing("a", "sa", "ca", "da"), podUsing("b", "sb", "cb", "db")} {
		if err := s.PutPod(p); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(filepath.Join(s.Dir(), "pods", "a.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("pod file %v %v", fi, err)
	}
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sa", ResourceVersion: "7"}, Data: map[string][]byte{"k": []byte("v")}}
	if err := s.PutObject(Secrets, "default", "sa", "7", secret); err != nil {
		t.Fatal(err)
	}
	var got v1.Secret
	if ok, err := s.Object(Secrets, "default", "sa", &got); !ok || err != nil || string(got.Data["k"]) != "v" {
		t.Fatalf("secret %v %v %+v", ok, err, got)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"x"}, ExpirationSeconds: ptr.To[int64](600)},
		Status: authenticationv1.TokenRequestStatus{Token: "tok", ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Hour))}}
	if err := s.PutToken("a", "default/sa", tr); err != nil {
		t.Fatal(err)
	}
	if kept, ok, err := s.Token("a", "default/sa", tr.Spec); !ok || err != nil || kept.Status.Token != "tok" {
		t.Fatalf("token %v %v %+v", ok, err, kept)
	}
	if _, ok, _ := s.Token("a", "default/sa", authenticationv1.TokenRequestSpec{Audiences: []string{"other"}}); ok {
		t.Fatal("a token found for another audience")
	}
	if err := s.PutServiceEnv("a", map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1"}); err != nil {
		t.Fatal(err)
	}
	if env, ok, err := s.ServiceEnv("a"); !ok || err != nil || env["KUBERNETES_SERVICE_HOST"] != "10.96.0.1" {
		t.Fatalf("service env %v %v %v", env, ok, err)
	}

	// Damaged, truncated and newer files.
	for name, data := range map[string]string{"bad.json": "{not json", "cut.json": `{"version":1,"object":{"metadata":`,
		"new.json": `{"version":99,"object":{}}`, "empty.json": ""} {
		if err := os.WriteFile(filepath.Join(s.Dir(), "pods", name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pods, errs := s.Pods()
	if len(pods) != 2 || len(errs) != 4 {
		t.Fatalf("%d pods, errors %v", len(pods), errs)
	}
	newer := false
	for _, err := range errs {
		newer = newer || strings.Contains(err.Error(), "written by a newer node agent (version 99")
	}
	if !newer {
		t.Errorf("the newer file's error does not say so: %v", errs)
	}

	// A pod gone takes its tokens, its environment and the objects only it used.
	if err := s.PutObject(Secrets, "default", "sb", "1", &v1.Secret{}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePod("a"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Object(Secrets, "default", "sa", &v1.Secret{}); ok {
		t.Error("pod a's secret kept after the pod")
	}
	if ok, _ := s.Object(Secrets, "default", "sb", &v1.Secret{}); !ok {
		t.Error("pod b's secret removed with pod a")
	}
	if _, ok, _ := s.Token("a", "default/sa", tr.Spec); ok {
		t.Error("pod a's token kept after the pod")
	}
	if _, ok, _ := s.ServiceEnv("a"); ok {
		t.Error("pod a's environment kept after the pod")
	}

	// A restarted node (a new Store on the same directory) that forgets a pod before it has written the
	// others keeps their objects: the pods on disk count.
	s.Flush()
	s2 := openStore(t, root)
	if err := s2.DeletePod("gone"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s2.Object(Secrets, "default", "sb", &v1.Secret{}); !ok {
		t.Error("a restarted node removed the secret of a pod it had not written yet")
	}

	// Names that are not one path element are refused, never joined.
	for _, name := range []string{"../x", "a/b", "..", ""} {
		if err := s.PutObject(Secrets, "default", name, "", &v1.Secret{}); err == nil {
			t.Errorf("object name %q accepted", name)
		}
		if err := s.PutPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(name)}}); err == nil {
			t.Errorf("pod UID %q accepted", name)
		}
	}
	if err := Remove(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir()); !os.IsNotExist(err) {
		t.Errorf("the checkpoint is still there: %v", err)
	}
}

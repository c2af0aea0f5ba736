package offline

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Tokens, objects and environments are written off the caller's path: read back at once, on disk after
// Flush, in the files a restarted node reads.
func TestLaterWritesReadBackAndFlush(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"x"}},
		Status: authenticationv1.TokenRequestStatus{Token: "tok", ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Hour))}}
	for i := range 50 {
		uid := types.UID(fmt.Sprint("p", i))
		if err := s.PutToken(uid, "default/sa", tr); err != nil {
			t.Fatal(err)
		}
		if kept, ok, err := s.Token(uid, "default/sa", tr.Spec); !ok || err != nil || kept.Status.Token != "tok" {
			t.Fatalf("token of %s read back: %v %v %v", uid, kept, ok, err)
		}
		if err := s.PutServiceEnv(uid, map[string]string{"N": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	s.Flush()
	s2 := openStore(t, root)
	for i := range 50 {
		uid := types.UID(fmt.Sprint("p", i))
		if _, ok, err := s2.Token(uid, "default/sa", tr.Spec); !ok || err != nil {
			t.Errorf("token of %s not on disk after Flush: %v %v", uid, ok, err)
		}
		if env, ok, err := s2.ServiceEnv(uid); !ok || err != nil || env["N"] != fmt.Sprint(i) {
			t.Errorf("environment of %s on disk: %v %v %v", uid, env, ok, err)
		}
	}
}

// A pod forgotten right after its token, environment and objects were queued leaves nothing of them on
// disk, whether their write was queued, in progress or done when it was forgotten; and the last of several
// writes of one file is what stays.
func TestLaterWritesNeverOutliveTheirRemoval(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	tr := &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: "tok"}}
	for i := range 200 {
		uid := types.UID(fmt.Sprint("gone", i))
		if err := s.PutToken(uid, "default/sa", tr); err != nil {
			t.Fatal(err)
		}
		if err := s.PutServiceEnv(uid, map[string]string{"I": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		secret := fmt.Sprint("s", i)
		if err := s.PutObject(Secrets, "default", secret, "1", &v1.Secret{}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			time.Sleep(time.Duration(i%7) * 100 * time.Microsecond) // some writes under way, some done
		}
		if err := s.DeletePod(uid); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.Token(uid, "default/sa", tr.Spec); ok {
			t.Fatalf("token of %s read after its pod was forgotten", uid)
		}
		if ok, _ := s.Object(Secrets, "default", secret, &v1.Secret{}); ok {
			t.Fatalf("secret %s, used by no pod, read after the pod was forgotten", secret)
		}
	}
	for i := range 100 {
		if err := s.PutServiceEnv("kept", map[string]string{"I": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	s.Flush()
	for _, dir := range []string{"tokens", "serviceenv", filepath.Join("objects", Secrets, "default")} {
		entries, _ := os.ReadDir(filepath.Join(s.Dir(), dir))
		for _, e := range entries {
			if e.Name() != "kept.json" {
				t.Errorf("%s/%s written after its pod was forgotten", dir, e.Name())
			}
		}
	}
	if env, ok, err := openStore(t, root).ServiceEnv("kept"); !ok || err != nil || env["I"] != "99" {
		t.Errorf("the last of 100 writes of one file: %v %v %v", env, ok, err)
	}
}

// Forgetting a pod prunes only what pods refer to: the node's own Node stays.
func TestDeletePodKeepsTheNode(t *testing.T) {
	s := openStore(t, t.TempDir())
	if err := s.PutObject("nodes", "", "node-1", "1", &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}); err != nil {
		t.Fatal(err)
	}
	s.Flush()
	if err := s.DeletePod("a"); err != nil {
		t.Fatal(err)
	}
	var n v1.Node
	if ok, err := s.Object("nodes", "", "node-1", &n); !ok || err != nil || n.Name != "node-1" {
		t.Errorf("the Node after a pod was forgotten: %v %v %v", ok, err, n.Name)
	}
}

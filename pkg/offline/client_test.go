package offline

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/kubeclient/kubeclienttest"
)

// Reads through the checkpoint: an answer is kept, a NotFound forgets it, and while the API server cannot
// be reached the kept answer is given; a token only while it is valid.
func TestClientKeepsAnswers(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewSimpleClientset(
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cfg", ResourceVersion: "3"}, Data: map[string]string{"a": "1"}},
		&v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}})
	away := false
	cs.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		if away {
			return true, nil, errors.Join(errors.New("dial tcp 127.0.0.1:6443"), syscall.ECONNREFUSED)
		}
		return false, nil, nil
	})
	issued := 0
	cs.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if away || a.GetSubresource() != "token" {
			return false, nil, nil
		}
		issued++
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: "t1",
			ExpirationTimestamp: metav1.NewTime(time.Now().Add(10 * time.Minute))}}, nil
	})
	s := openStore(t, t.TempDir())
	c := Client(kubeclienttest.Wrap(cs), s)
	if cm, err := c.CoreV1().ConfigMaps("default").Get(ctx, "cfg", metav1.GetOptions{}); err != nil || cm.Data["a"] != "1" {
		t.Fatalf("online read %v %v", cm, err)
	}
	if _, err := c.CoreV1().PersistentVolumes().Get(ctx, "pv", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}, ExpirationSeconds: ptr.To[int64](600),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p", UID: "uid-1"}}}
	if tr, err := c.CoreV1().ServiceAccounts("default").CreateToken(ctx, "default", req, metav1.CreateOptions{}); err != nil || tr.Status.Token != "t1" || issued != 1 {
		t.Fatalf("online token %v %v (issued %d)", tr, err, issued)
	}

	away = true
	if cm, err := c.CoreV1().ConfigMaps("default").Get(ctx, "cfg", metav1.GetOptions{}); err != nil || cm.Data["a"] != "1" {
		t.Errorf("offline read: %v %v", cm, err)
	}
	if pv, err := c.CoreV1().PersistentVolumes().Get(ctx, "pv", metav1.GetOptions{}); err != nil || pv.Name != "pv" {
		t.Errorf("offline read of a cluster-scoped object: %v %v", pv, err)
	}
	if _, err := c.CoreV1().Secrets("default").Get(ctx, "never-read", metav1.GetOptions{}); err == nil {
		t.Error("a secret never read is served offline")
	}
	if tr, err := c.CoreV1().ServiceAccounts("default").CreateToken(ctx, "default", req, metav1.CreateOptions{}); err != nil || tr.Status.Token != "t1" {
		t.Errorf("offline token: %v %v", tr, err)
	}
	other := req.DeepCopy()
	other.Spec.BoundObjectRef.UID = "uid-2"
	if _, err := c.CoreV1().ServiceAccounts("default").CreateToken(ctx, "default", other, metav1.CreateOptions{}); err == nil {
		t.Error("another pod's token served offline")
	}

	// Online again: the API server says the configMap is gone, and the checkpoint forgets it.
	away = false
	if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "cfg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ConfigMaps("default").Get(ctx, "cfg", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("deleted configMap: %v", err)
	}
	away = true
	if _, err := c.CoreV1().ConfigMaps("default").Get(ctx, "cfg", metav1.GetOptions{}); err == nil {
		t.Error("a configMap the API server deleted is served offline")
	}
}

// The service environment: recorded while the Services are known, given while they are not.
func TestServiceEnv(t *testing.T) {
	s := openStore(t, t.TempDir())
	synced := true
	env := ServiceEnv(func(*v1.Pod) (map[string]string, error) {
		if !synced {
			return nil, errors.New("services have not yet been read at least once")
		}
		return map[string]string{"KUBERNETES_PORT": "tcp://10.96.0.1:443"}, nil
	}, s)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}}
	if vars, err := env(pod); err != nil || vars["KUBERNETES_PORT"] == "" {
		t.Fatal(vars, err)
	}
	synced = false
	if vars, err := env(pod); err != nil || vars["KUBERNETES_PORT"] != "tcp://10.96.0.1:443" {
		t.Errorf("offline: %v %v", vars, err)
	}
	if _, err := env(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", UID: "v"}}); err == nil {
		t.Error("a pod never seen gets an environment")
	}
}

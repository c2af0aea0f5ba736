package admission

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

type fakeAccounts map[string]*corev1.ServiceAccount

func (f fakeAccounts) ServiceAccount(ns, name string) (*corev1.ServiceAccount, error) {
	if sa, ok := f[ns+"/"+name]; ok {
		return sa, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("serviceaccounts"), name)
}

var podsResource = &registry.Resource{Version: "v1", Name: "pods", Kind: "Pod", Namespaced: true}

func createAttrs(pod *corev1.Pod) *rest.Attributes {
	return &rest.Attributes{Info: &request.Info{IsResource: true, Verb: "create", Version: "v1", Resource: "pods",
		Namespace: pod.Namespace}, Resource: podsResource, Object: pod}
}

func testPlugin(accounts fakeAccounts, clk clock.Clock) *ServiceAccount {
	p := NewServiceAccount(accounts, clk)
	p.generateName = func(prefix string) string { return prefix + "abcde" }
	return p
}

func withMirror(p *corev1.Pod) *corev1.Pod {
	p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
	return p
}

func pod(mod func(*corev1.PodSpec)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "myns", Name: "mypod"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	if mod != nil {
		mod(&p.Spec)
	}
	return p
}

func secretVolume(name string) corev1.Volume {
	return corev1.Volume{Name: "s-" + name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}}
}

func secretEnv(name string) corev1.EnvVar {
	return corev1.EnvVar{Name: "E", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}}}
}

var (
	tokenMount  = corev1.VolumeMount{Name: "kube-api-access-abcde", ReadOnly: true, MountPath: DefaultAPITokenMountPath}
	tokenVolume = corev1.Volume{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: TokenVolumeSource()}}
)

// The cases of kube-apiserver's ServiceAccount admission tests (plugin/pkg/admission/serviceaccount).
func TestServiceAccountAdmission(t *testing.T) {
	sa := func(name string, mod func(*corev1.ServiceAccount)) *corev1.ServiceAccount {
		s := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "myns", Name: name, UID: "12345"}}
		if mod != nil {
			mod(s)
		}
		return s
	}
	enforcing := func(s *corev1.ServiceAccount) {
		s.Annotations = map[string]string{EnforceMountableSecretsAnnotation: "true"}
		s.Secrets = []corev1.ObjectReference{{Name: "foo"}}
		s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
	}
	for _, tc := range []struct {
		name     string
		accounts fakeAccounts
		pod      *corev1.Pod
		wantErr  string
		check    func(t *testing.T, p *corev1.Pod)
	}{
		{name: "mirror pod without service account or secrets", pod: withMirror(pod(func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		})), check: func(t *testing.T, p *corev1.Pod) {
			if p.Spec.ServiceAccountName != "" || len(p.Spec.Volumes) != 1 {
				t.Errorf("mirror pod changed: %+v", p.Spec)
			}
		}},
		{name: "mirror pod with a service account", pod: withMirror(pod(func(s *corev1.PodSpec) { s.ServiceAccountName = "default" })),
			wantErr: "a mirror pod may not reference service accounts"},
		{name: "mirror pod with a secret volume", pod: withMirror(pod(func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{secretVolume("mysecret")}
		})), wantErr: "a mirror pod may not reference secrets"},
		{name: "mirror pod with a secret in an ephemeral container's env", pod: withMirror(pod(func(s *corev1.PodSpec) {
			s.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "d", Env: []corev1.EnvVar{secretEnv("s")}}}}
		})), wantErr: "a mirror pod may not reference secrets"},
		{name: "mirror pod with a token projection", pod: withMirror(pod(func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "t", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{}}}}}}}
		})), wantErr: "a mirror pod may not use ServiceAccountToken volume projections"},
		{name: "default service account and its token", accounts: fakeAccounts{"myns/default": sa("default", nil)}, pod: pod(nil),
			check: func(t *testing.T, p *corev1.Pod) {
				if p.Spec.ServiceAccountName != "default" || !reflect.DeepEqual(p.Spec.Volumes, []corev1.Volume{tokenVolume}) ||
					!reflect.DeepEqual(p.Spec.Containers[0].VolumeMounts, []corev1.VolumeMount{tokenMount}) {
					t.Errorf("spec %+v", p.Spec)
				}
			}},
		{name: "missing service account", accounts: fakeAccounts{}, pod: pod(func(s *corev1.PodSpec) { s.ServiceAccountName = "builder" }),
			wantErr: `error looking up service account myns/builder: serviceaccount "builder" not found`},
		{name: "init containers get the token", accounts: fakeAccounts{"myns/default": sa("default", nil)},
			pod: pod(func(s *corev1.PodSpec) { s.InitContainers = []corev1.Container{{Name: "i"}} }),
			check: func(t *testing.T, p *corev1.Pod) {
				if !reflect.DeepEqual(p.Spec.InitContainers[0].VolumeMounts, []corev1.VolumeMount{tokenMount}) ||
					len(p.Spec.Volumes) != 1 {
					t.Errorf("spec %+v", p.Spec)
				}
			}},
		{name: "an existing mount at the token path is kept, and no volume added", accounts: fakeAccounts{"myns/default": sa("default", nil)},
			pod: pod(func(s *corev1.PodSpec) {
				s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "my-custom-mount", MountPath: DefaultAPITokenMountPath}}
			}),
			check: func(t *testing.T, p *corev1.Pod) {
				if len(p.Spec.Volumes) != 0 || len(p.Spec.Containers[0].VolumeMounts) != 1 ||
					p.Spec.Containers[0].VolumeMounts[0].Name != "my-custom-mount" {
					t.Errorf("spec %+v", p.Spec)
				}
			}},
		{name: "automount off on the service account", accounts: fakeAccounts{"myns/default": sa("default", func(s *corev1.ServiceAccount) {
			s.AutomountServiceAccountToken = ptr.To(false)
		})}, pod: pod(nil), check: func(t *testing.T, p *corev1.Pod) {
			if len(p.Spec.Volumes) != 0 || len(p.Spec.Containers[0].VolumeMounts) != 0 {
				t.Errorf("spec %+v", p.Spec)
			}
		}},
		{name: "automount on for the pod overrides the service account", accounts: fakeAccounts{"myns/default": sa("default", func(s *corev1.ServiceAccount) {
			s.AutomountServiceAccountToken = ptr.To(false)
		})}, pod: pod(func(s *corev1.PodSpec) { s.AutomountServiceAccountToken = ptr.To(true) }), check: func(t *testing.T, p *corev1.Pod) {
			if len(p.Spec.Volumes) != 1 {
				t.Errorf("spec %+v", p.Spec)
			}
		}},
		{name: "automount off on the pod", accounts: fakeAccounts{"myns/default": sa("default", nil)},
			pod: pod(func(s *corev1.PodSpec) { s.AutomountServiceAccountToken = ptr.To(false) }), check: func(t *testing.T, p *corev1.Pod) {
				if len(p.Spec.Volumes) != 0 || p.Spec.ServiceAccountName != "default" {
					t.Errorf("spec %+v", p.Spec)
				}
			}},
		{name: "image pull secrets of the service account", accounts: fakeAccounts{"myns/default": sa("default", func(s *corev1.ServiceAccount) {
			s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "foo"}, {Name: "bar"}}
		})}, pod: pod(nil), check: func(t *testing.T, p *corev1.Pod) {
			if !reflect.DeepEqual(p.Spec.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "foo"}, {Name: "bar"}}) {
				t.Errorf("pull secrets %v", p.Spec.ImagePullSecrets)
			}
		}},
		{name: "the pod's own image pull secrets are kept", accounts: fakeAccounts{"myns/default": sa("default", func(s *corev1.ServiceAccount) {
			s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "foo"}}
		})}, pod: pod(func(s *corev1.PodSpec) { s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "mine"}} }),
			check: func(t *testing.T, p *corev1.Pod) {
				if !reflect.DeepEqual(p.Spec.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "mine"}}) {
					t.Errorf("pull secrets %v", p.Spec.ImagePullSecrets)
				}
			}},
		{name: "enforced: a listed secret", accounts: fakeAccounts{"myns/default": sa("default", enforcing)},
			pod: pod(func(s *corev1.PodSpec) {
				s.Volumes = []corev1.Volume{secretVolume("foo")}
				s.Containers[0].Env = []corev1.EnvVar{secretEnv("foo")}
			})},
		{name: "enforced: an unlisted secret volume", accounts: fakeAccounts{"myns/default": sa("default", enforcing)},
			pod:     pod(func(s *corev1.PodSpec) { s.Volumes = []corev1.Volume{secretVolume("bar")} }),
			wantErr: `volume with secret.secretName="bar" is not allowed because service account default does not reference that secret`},
		{name: "enforced: an unlisted secret in an init container's env", accounts: fakeAccounts{"myns/default": sa("default", enforcing)},
			pod: pod(func(s *corev1.PodSpec) {
				s.InitContainers = []corev1.Container{{Name: "i", Env: []corev1.EnvVar{secretEnv("bar")}}}
			}),
			wantErr: `init container i with envVar E referencing secret.secretName="bar" is not allowed`},
		{name: "enforced: an unlisted secret in envFrom", accounts: fakeAccounts{"myns/default": sa("default", enforcing)},
			pod: pod(func(s *corev1.PodSpec) {
				s.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "bar"}}}}
			}),
			wantErr: `container c with envFrom referencing secret.secretName="bar" is not allowed`},
		{name: "enforced: an unlisted image pull secret", accounts: fakeAccounts{"myns/default": sa("default", enforcing)},
			pod:     pod(func(s *corev1.PodSpec) { s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "other"}} }),
			wantErr: `imagePullSecrets[0].name="other" is not allowed because service account default does not reference that imagePullSecret`},
		{name: "not enforced: any secret", accounts: fakeAccounts{"myns/default": sa("default", func(s *corev1.ServiceAccount) {
			s.Annotations = map[string]string{EnforceMountableSecretsAnnotation: "false"}
		})}, pod: pod(func(s *corev1.PodSpec) { s.Volumes = []corev1.Volume{secretVolume("bar")} })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPlugin(tc.accounts, clocktesting.NewFakeClock(time.Now()))
			p.waitDefault = 0
			err := p.Mutate(context.Background(), createAttrs(tc.pod))
			if tc.wantErr != "" {
				if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want Forbidden %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Admission run again (a retried write) changes nothing more.
			again := tc.pod.DeepCopy()
			if err := p.Mutate(context.Background(), createAttrs(again)); err != nil || !reflect.DeepEqual(again, tc.pod) {
				t.Errorf("a second run: %v, %+v", err, again.Spec)
			}
			if tc.check != nil {
				tc.check(t, tc.pod)
			}
		})
	}
}

// Updates, subresources and other kinds are not the plugin's business.
func TestServiceAccountAdmissionIgnores(t *testing.T) {
	p := testPlugin(fakeAccounts{}, clock.RealClock{})
	for name, a := range map[string]*rest.Attributes{
		"update":       {Resource: podsResource, Object: pod(nil), Old: pod(nil)},
		"status":       {Resource: podsResource, Object: pod(nil), Info: &request.Info{Subresource: "status"}},
		"another kind": {Resource: &registry.Resource{Version: "v1", Name: "configmaps"}, Object: &corev1.ConfigMap{}},
	} {
		if err := p.Mutate(context.Background(), a); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// An ephemeral container added to a pod is held to its service account's mountable secrets.
func TestServiceAccountAdmissionEphemeralContainers(t *testing.T) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "myns", Name: "default"},
		Secrets: []corev1.ObjectReference{{Name: "foo"}}}
	p := testPlugin(fakeAccounts{"myns/default": sa}, clock.RealClock{})
	old := pod(func(s *corev1.PodSpec) { s.ServiceAccountName = "default" })
	debugged := old.DeepCopy()
	debugged.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "dbg", Env: []corev1.EnvVar{secretEnv("bar")}}}}
	attrs := func() *rest.Attributes {
		return &rest.Attributes{Resource: podsResource, Object: debugged, Old: old,
			Info: &request.Info{IsResource: true, Verb: "patch", Resource: "pods", Subresource: "ephemeralcontainers"}}
	}
	if err := p.Mutate(context.Background(), attrs()); err != nil {
		t.Fatalf("not enforced: %v", err)
	}
	sa.Annotations = map[string]string{EnforceMountableSecretsAnnotation: "true"}
	err := p.Mutate(context.Background(), attrs())
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `ephemeral container dbg with envVar E referencing secret.secretName="bar" is not allowed`) {
		t.Fatalf("enforced: %v", err)
	}
}

// A pod created just after its namespace waits for the default service account the control loop creates.
func TestServiceAccountAdmissionWaitsForDefault(t *testing.T) {
	accounts := fakeAccounts{}
	clk := &sleepHook{FakeClock: clocktesting.NewFakeClock(time.Now())}
	clk.onSleep = func(n int) {
		if n == 3 {
			accounts["myns/default"] = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "myns", Name: "default"}}
		}
	}
	p := testPlugin(accounts, clk)
	if err := p.Mutate(context.Background(), createAttrs(pod(nil))); err != nil {
		t.Fatalf("default service account appearing: %v", err)
	}
	// It gives up in the end.
	clk.onSleep = nil
	p = testPlugin(fakeAccounts{}, clk)
	if err := p.Mutate(context.Background(), createAttrs(pod(nil))); !apierrors.IsForbidden(err) {
		t.Fatalf("no default service account: %v", err)
	}
}

// sleepHook is a fake clock whose Sleep steps it and calls onSleep with the number of sleeps so far.
type sleepHook struct {
	*clocktesting.FakeClock
	n       int
	onSleep func(n int)
}

func (s *sleepHook) Sleep(d time.Duration) {
	s.n++
	s.Step(d)
	if s.onSleep != nil {
		s.onSleep(s.n)
	}
}

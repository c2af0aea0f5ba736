package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

// Names and paths of kube-apiserver's ServiceAccount admission.
const (
	DefaultServiceAccountName = "default"
	// ServiceAccountVolumeName is the prefix of the injected volume's name.
	ServiceAccountVolumeName = "kube-api-access"
	// DefaultAPITokenMountPath is where containers find the token, the CA and the namespace.
	DefaultAPITokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// EnforceMountableSecretsAnnotation on a service account limits its pods to the secrets it lists.
	EnforceMountableSecretsAnnotation = "kubernetes.io/enforce-mountable-secrets"
	// TokenExpirationSeconds is the projected token's validity (an hour and 7 s, which kube-apiserver
	// recognises as the injected token's).
	TokenExpirationSeconds = 60*60 + 7
	rootCAConfigMap        = "kube-root-ca.crt"
)

// ServiceAccountGetter reads service accounts (the store's NotFound when
// missing).
type ServiceAccountGetter interface {
	ServiceAccount(namespace, name string) (*corev1.ServiceAccount, error)
}

// ServiceAccount is kube-apiserver's ServiceAccount admission for pod
// creates: a pod runs as the default service account unless it names one;
// the service account must exist; unless automounting is off (on the pod,
// or else on the service account) every container and init container gets
// the service account's token, the cluster CA and the namespace in a
// projected kube-api-access-<random> volume; a pod without image pull
// secrets gets its service account's. Mirror pods are left as they are but
// may refer to no service account, secret or token. It is safe for
// concurrent use.
type ServiceAccount struct {
	accounts ServiceAccountGetter
	clock    clock.Clock
	// waitDefault is how long a pod waits for its namespace's default
	// service account, which the control loop creates with the namespace.
	waitDefault  time.Duration
	generateName func(prefix string) string
}

// NewServiceAccount returns the plugin reading service accounts from
// accounts; clk paces the wait for a new namespace's default service account.
func NewServiceAccount(accounts ServiceAccountGetter, clk clock.Clock) *ServiceAccount {
	return &ServiceAccount{accounts: accounts, clock: clk, waitDefault: 2 * time.Second,
		generateName: func(prefix string) string { return prefix + utilrand.String(5) }}
}

var _ rest.Mutator = (*ServiceAccount)(nil)

// Mutate implements rest.Mutator for creates of pods; it ignores everything
// else.
func (p *ServiceAccount) Mutate(ctx context.Context, a *rest.Attributes) error {
	if a.Resource == nil || a.Resource.Group != "" || a.Resource.Name != "pods" {
		return nil
	}
	if a.Old != nil && a.Info != nil && a.Info.Subresource == "ephemeralcontainers" {
		return p.admitEphemeralContainers(ctx, a)
	}
	if a.Old != nil || a.Info != nil && a.Info.Subresource != "" {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return nil
	}
	forbid := func(err error) error { return apierrors.NewForbidden(corev1.Resource("pods"), podName(pod), err) }
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		if err := validateMirrorPod(pod); err != nil {
			return forbid(err)
		}
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = DefaultServiceAccountName
	}
	sa, err := p.lookup(ctx, pod.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return forbid(fmt.Errorf("error looking up service account %s/%s: %w", pod.Namespace, pod.Spec.ServiceAccountName, err))
	}
	if shouldAutomount(sa, pod) {
		mountServiceAccountToken(pod, p.generateName)
	}
	if len(pod.Spec.ImagePullSecrets) == 0 && len(sa.ImagePullSecrets) > 0 {
		for _, s := range sa.ImagePullSecrets {
			pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s.Name})
		}
	}
	if enforceMountableSecrets(sa) {
		if err := limitSecretReferences(sa, pod); err != nil {
			return forbid(err)
		}
	}
	return nil
}

// admitEphemeralContainers holds ephemeral containers added to a pod to its service account's mountable
// secrets, as upstream's plugin does for pods/ephemeralcontainers.
func (p *ServiceAccount) admitEphemeralContainers(ctx context.Context, a *rest.Attributes) error {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || pod.Spec.ServiceAccountName == "" {
		return nil
	}
	sa, err := p.lookup(ctx, pod.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return apierrors.NewForbidden(corev1.Resource("pods"), podName(pod),
			fmt.Errorf("error looking up service account %s/%s: %w", pod.Namespace, pod.Spec.ServiceAccountName, err))
	}
	if !enforceMountableSecrets(sa) {
		return nil
	}
	if err := limitSecretReferences(sa, pod); err != nil {
		return apierrors.NewForbidden(corev1.Resource("pods"), podName(pod), err)
	}
	return nil
}

// podName names a pod in an error, as kube-apiserver's admission does
// before a generated name exists.
func podName(pod *corev1.Pod) string {
	switch {
	case pod.Name != "":
		return pod.Name
	case pod.GenerateName != "":
		return pod.GenerateName
	}
	return "Unknown"
}

// lookup returns the named service account; a namespace's default one is
// waited for a little, since it is created just after its namespace.
func (p *ServiceAccount) lookup(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	deadline := p.clock.Now().Add(p.waitDefault)
	for {
		sa, err := p.accounts.ServiceAccount(ns, name)
		if err == nil || !apierrors.IsNotFound(err) || name != DefaultServiceAccountName ||
			!p.clock.Now().Before(deadline) || ctx.Err() != nil {
			if apierrors.IsNotFound(err) {
				err = apierrors.NewNotFound(corev1.Resource("serviceaccount"), name)
			}
			return sa, err
		}
		p.clock.Sleep(100 * time.Millisecond)
	}
}

// shouldAutomount reports whether a pod gets its service account's token:
// as the pod says, else as the service account says, else yes.
func shouldAutomount(sa *corev1.ServiceAccount, pod *corev1.Pod) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	if sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

// TokenVolumeSource returns the projected source of the injected volume:
// the token, the cluster CA and the namespace.
func TokenVolumeSource() *corev1.ProjectedVolumeSource {
	return &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](corev1.ProjectedVolumeSourceDefaultMode),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token",
				ExpirationSeconds: ptr.To[int64](TokenExpirationSeconds)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: rootCAConfigMap},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}
}

// mountServiceAccountToken mounts the token volume read-only at
// DefaultAPITokenMountPath in every container and init container that mounts
// nothing there, adding the volume (named by generateName) unless the pod
// has a kube-api-access-* volume already, as kube-apiserver does. It is
// idempotent.
func mountServiceAccountToken(pod *corev1.Pod, generateName func(string) string) {
	name := ""
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, ServiceAccountVolumeName+"-") {
			name = v.Name
			break
		}
	}
	hasVolume := name != ""
	if !hasVolume {
		name = generateName(ServiceAccountVolumeName + "-")
	}
	mount := corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: DefaultAPITokenMountPath}
	needed := false
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			mounted := false
			for _, m := range cs[i].VolumeMounts {
				if m.MountPath == DefaultAPITokenMountPath {
					mounted = true
					break
				}
			}
			if !mounted {
				cs[i].VolumeMounts = append(cs[i].VolumeMounts, mount)
				needed = true
			}
		}
	}
	if !hasVolume && needed {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name,
			VolumeSource: corev1.VolumeSource{Projected: TokenVolumeSource()}})
	}
}

// validateMirrorPod refuses a mirror pod that refers to a service account, a
// secret or a service account token.
func validateMirrorPod(pod *corev1.Pod) error {
	if pod.Spec.ServiceAccountName != "" {
		return fmt.Errorf("a mirror pod may not reference service accounts")
	}
	if len(secretNames(pod)) > 0 {
		return fmt.Errorf("a mirror pod may not reference secrets")
	}
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil {
				return fmt.Errorf("a mirror pod may not use ServiceAccountToken volume projections")
			}
		}
	}
	return nil
}

// secretNames returns the secrets a pod refers to: image pull secrets,
// secret volumes and projections, the secret references of other volume
// types, and the env of every container.
func secretNames(pod *corev1.Pod) []string {
	var out []string
	for _, s := range pod.Spec.ImagePullSecrets {
		out = append(out, s.Name)
	}
	ref := func(r *corev1.LocalObjectReference) {
		if r != nil {
			out = append(out, r.Name)
		}
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			out = append(out, v.Secret.SecretName)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					out = append(out, src.Secret.Name)
				}
			}
		case v.AzureFile != nil:
			out = append(out, v.AzureFile.SecretName)
		case v.CephFS != nil:
			ref(v.CephFS.SecretRef)
		case v.Cinder != nil:
			ref(v.Cinder.SecretRef)
		case v.FlexVolume != nil:
			ref(v.FlexVolume.SecretRef)
		case v.RBD != nil:
			ref(v.RBD.SecretRef)
		case v.ScaleIO != nil:
			ref(v.ScaleIO.SecretRef)
		case v.ISCSI != nil:
			ref(v.ISCSI.SecretRef)
		case v.StorageOS != nil:
			ref(v.StorageOS.SecretRef)
		case v.CSI != nil:
			ref(v.CSI.NodePublishSecretRef)
		}
	}
	env := func(envFrom []corev1.EnvFromSource, vars []corev1.EnvVar) {
		for _, e := range envFrom {
			if e.SecretRef != nil {
				out = append(out, e.SecretRef.Name)
			}
		}
		for _, e := range vars {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out = append(out, e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			env(c.EnvFrom, c.Env)
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		env(c.EnvFrom, c.Env)
	}
	return out
}

// enforceMountableSecrets reports whether a service account limits its pods
// to the secrets it lists (its enforce-mountable-secrets annotation).
func enforceMountableSecrets(sa *corev1.ServiceAccount) bool {
	v, ok := sa.Annotations[EnforceMountableSecretsAnnotation]
	if !ok {
		return false
	}
	b, _ := strconv.ParseBool(v)
	return b
}

// limitSecretReferences refuses a pod that uses a secret its service account
// does not list (secrets for volumes and env, imagePullSecrets for pull
// secrets), with kube-apiserver's messages.
func limitSecretReferences(sa *corev1.ServiceAccount, pod *corev1.Pod) error {
	mountable := map[string]bool{}
	for _, s := range sa.Secrets {
		mountable[s.Name] = true
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && !mountable[v.Secret.SecretName] {
			return fmt.Errorf("volume with secret.secretName=%q is not allowed because service account %s does not reference that secret",
				v.Secret.SecretName, sa.Name)
		}
	}
	for _, set := range []struct {
		what string
		cs   []corev1.Container
	}{{"init container", pod.Spec.InitContainers}, {"container", pod.Spec.Containers}, {"ephemeral container", ephemeralContainers(pod)}} {
		for _, c := range set.cs {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && !mountable[e.ValueFrom.SecretKeyRef.Name] {
					return fmt.Errorf("%s %s with envVar %s referencing secret.secretName=%q is not allowed because service account %s does not reference that secret",
						set.what, c.Name, e.Name, e.ValueFrom.SecretKeyRef.Name, sa.Name)
				}
			}
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil && !mountable[e.SecretRef.Name] {
					return fmt.Errorf("%s %s with envFrom referencing secret.secretName=%q is not allowed because service account %s does not reference that secret",
						set.what, c.Name, e.SecretRef.Name, sa.Name)
				}
			}
		}
	}
	pull := map[string]bool{}
	for _, s := range sa.ImagePullSecrets {
		pull[s.Name] = true
	}
	for i, ref := range pod.Spec.ImagePullSecrets {
		if !pull[ref.Name] {
			return fmt.Errorf(`imagePullSecrets[%d].name=%q is not allowed because service account %s does not reference that imagePullSecret`,
				i, ref.Name, sa.Name)
		}
	}
	return nil
}

func ephemeralContainers(pod *corev1.Pod) []corev1.Container {
	out := make([]corev1.Container, len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.EphemeralContainers {
		out[i] = corev1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
	}
	return out
}

// Mutators runs each of its members in order; the first refusal stops it.
type Mutators []rest.Mutator

var _ rest.Mutator = Mutators(nil)

// Mutate implements rest.Mutator.
func (ms Mutators) Mutate(ctx context.Context, a *rest.Attributes) error {
	for _, m := range ms {
		if err := m.Mutate(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

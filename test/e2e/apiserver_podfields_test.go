//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// podFieldCase is one manifest sent to both API servers, changed from a plain pod by edit.
type podFieldCase struct {
	name string
	edit func(*v1.Pod)
}

// podFields135Cases use the pod fields Kubernetes 1.33-1.35 turned on by default, valid and not.
func podFields135Cases() []podFieldCase {
	emptyDir := func(name string) v1.Volume {
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
	}
	imageVolume := func(p *v1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "busybox:1.35"}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: "img", MountPath: "/img"})
	}
	restartRules := func(op v1.ContainerRestartRuleOnExitCodesOperator, policy *v1.ContainerRestartPolicy) func(*v1.Pod) {
		return func(p *v1.Pod) {
			c := &p.Spec.Containers[0]
			c.RestartPolicy = policy
			c.RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: []int32{42}}}}
		}
	}
	never := v1.ContainerRestartPolicyNever
	envFile := func(volume v1.Volume, key string) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, volume)
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "FROM_FILE", ValueFrom: &v1.EnvVarSource{
				FileKeyRef: &v1.FileKeySelector{VolumeName: "cfg", Path: "app.env", Key: key}}}}
		}
	}
	groups := func(policy v1.SupplementalGroupsPolicy) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroups: []int64{60000}, SupplementalGroupsPolicy: &policy}
		}
	}
	hostname := func(name string, hostNetwork bool) func(*v1.Pod) {
		return func(p *v1.Pod) { p.Spec.HostnameOverride, p.Spec.HostNetwork = &name, hostNetwork }
	}
	rro := func(mode v1.RecursiveReadOnlyMode, readOnly bool, propagation *v1.MountPropagationMode) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, emptyDir("data"))
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: readOnly,
				RecursiveReadOnly: &mode, MountPropagation: propagation}}
		}
	}
	hostToContainer := v1.MountPropagationHostToContainer
	podResources := func(requests, limits v1.ResourceList, container v1.ResourceRequirements) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Requests: requests, Limits: limits}
			p.Spec.Containers[0].Resources = container
		}
	}
	q := resource.MustParse
	return []podFieldCase{
		{"hostUsers false", func(p *v1.Pod) { p.Spec.HostUsers = ptr.To(false) }},
		{"hostUsers false with hostNetwork", func(p *v1.Pod) { p.Spec.HostUsers, p.Spec.HostNetwork = ptr.To(false), true }},
		{"image volume", imageVolume},
		{"image volume with a subPath", func(p *v1.Pod) {
			imageVolume(p)
			p.Spec.Containers[0].VolumeMounts[0].SubPath = "bin"
		}},
		{"image volume with a digest and pullPolicy Always", func(p *v1.Pod) {
			imageVolume(p)
			p.Spec.Volumes[0].Image.PullPolicy = v1.PullAlways
		}},
		{"image volume with a bad pullPolicy", func(p *v1.Pod) {
			imageVolume(p)
			p.Spec.Volumes[0].Image.PullPolicy = "Sometimes"
		}},
		{"image volume without a reference", func(p *v1.Pod) {
			imageVolume(p)
			p.Spec.Volumes[0].Image.Reference = ""
		}},
		{"container restart rules", restartRules(v1.ContainerRestartRuleOnExitCodesOpIn, &never)},
		{"container restart rule with an unknown operator", restartRules("Between", &never)},
		{"container restart rules without a container restartPolicy", restartRules(v1.ContainerRestartRuleOnExitCodesOpIn, nil)},
		{"env from a file", envFile(emptyDir("cfg"), "FROM_FILE")},
		{"env from a file in a volume that is not an emptyDir", envFile(v1.Volume{Name: "cfg",
			VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "c"}}}}, "FROM_FILE")},
		{"env from a file with a bad key", envFile(emptyDir("cfg"), "1=bad")},
		{"env from a file with a path that leaves the volume", func(p *v1.Pod) {
			envFile(emptyDir("cfg"), "FROM_FILE")(p)
			p.Spec.Containers[0].Env[0].ValueFrom.FileKeyRef.Path = "../etc/passwd"
		}},
		{"hostUsers false with hostPID", func(p *v1.Pod) { p.Spec.HostUsers, p.Spec.HostPID = ptr.To(false), true }},
		{"env from a file in a missing volume", func(p *v1.Pod) {
			envFile(emptyDir("other"), "FROM_FILE")(p)
		}},
		{"supplementalGroupsPolicy Strict", groups(v1.SupplementalGroupsPolicyStrict)},
		{"supplementalGroupsPolicy unknown", groups("Loose")},
		{"hostnameOverride", hostname("my-host.example", false)},
		{"hostnameOverride not a DNS name", hostname("Not_A_Name", false)},
		{"hostnameOverride with hostNetwork", hostname("my-host", true)},
		{"recursiveReadOnly Enabled", rro(v1.RecursiveReadOnlyEnabled, true, nil)},
		{"recursiveReadOnly IfPossible", rro(v1.RecursiveReadOnlyIfPossible, true, nil)},
		{"recursiveReadOnly without readOnly", rro(v1.RecursiveReadOnlyEnabled, false, nil)},
		{"recursiveReadOnly with HostToContainer propagation", rro(v1.RecursiveReadOnlyEnabled, true, &hostToContainer)},
		{"recursiveReadOnly unknown mode", rro("Sometimes", true, nil)},
		{"pod-level resources", podResources(nil, v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("256Mi")},
			v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: q("100m")}})},
		{"pod-level requests above limits", podResources(v1.ResourceList{v1.ResourceCPU: q("2")}, v1.ResourceList{v1.ResourceCPU: q("1")},
			v1.ResourceRequirements{})},
		{"pod-level resources of an unsupported resource", podResources(nil, v1.ResourceList{v1.ResourceEphemeralStorage: q("1Gi")},
			v1.ResourceRequirements{})},
		{"a container limit above the pod's", podResources(nil, v1.ResourceList{v1.ResourceMemory: q("256Mi")},
			v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: q("512Mi")}})},
	}
}

// podFieldAnswer is what an API server made of a manifest: the pod as it would store it (its spec, in
// JSON), or the refusal's reason and the fields it named.
type podFieldAnswer struct {
	spec   string
	reason metav1.StatusReason
	fields []string
}

func (a podFieldAnswer) String() string {
	if a.reason == "" {
		return "accepted"
	}
	return fmt.Sprintf("refused (%s) naming %v", a.reason, a.fields)
}

// answerFor creates the pod as a dry run (nothing is stored) and reports the answer.
func answerFor(t *testing.T, c kubernetes.Interface, ns string, pod *v1.Pod) podFieldAnswer {
	t.Helper()
	got, err := c.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil {
		b, jerr := json.Marshal(got.Spec)
		if jerr != nil {
			t.Fatal(jerr)
		}
		return podFieldAnswer{spec: string(b)}
	}
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		t.Fatalf("create %s: %v", pod.Name, err)
	}
	a := podFieldAnswer{reason: status.Status().Reason}
	if d := status.Status().Details; d != nil {
		for _, cause := range d.Causes {
			a.fields = append(a.fields, cause.Field)
		}
	}
	slices.Sort(a.fields)
	a.fields = slices.Compact(a.fields)
	return a
}

// The lightweight API server answers the pod fields Kubernetes 1.33-1.35 turned on as kube-apiserver 1.35.4
// (with its default feature gates) answers the same manifest: both accept it and store the same spec (the
// same defaults), or both refuse it as Invalid naming the same fields. Each manifest is a dry-run create on
// each server.
func TestAPIServersAgreeOnPodFields135(t *testing.T) {
	parallel(t)
	light := startAPIServer(t, "").client
	real := realControlPlane(t).client
	const ns = "podfields135"
	for _, c := range []kubernetes.Interface{light, real} {
		ctx := context.Background()
		if _, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		// The shared control plane runs no controller manager: its service account admission needs the account.
		if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, tc := range podFields135Cases() {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fields"}, Spec: v1.PodSpec{
				AutomountServiceAccountToken: ptr.To(false),
				Containers:                   []v1.Container{{Name: "app", Image: "busybox:1.35", Command: []string{"sleep", "1"}}},
			}}
			tc.edit(pod)
			want := answerFor(t, real, ns, pod.DeepCopy())
			got := answerFor(t, light, ns, pod.DeepCopy())
			t.Logf("kube-apiserver: %s", want)
			if got.reason != want.reason || strings.Join(got.fields, ",") != strings.Join(want.fields, ",") {
				t.Errorf("lightweight API server: %s; kube-apiserver 1.35.4: %s", got, want)
				return
			}
			if got.spec != want.spec {
				t.Errorf("the stored specs differ:\nlightweight:    %s\nkube-apiserver: %s", got.spec, want.spec)
			}
		})
	}
}

package podspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

func TestContainerSecurityContext(t *testing.T) {
	const root = "/var/lib/kubelet/seccomp"
	for _, tt := range []struct {
		name    string
		psc     *v1.PodSecurityContext
		csc     *v1.SecurityContext
		check   func(*runtimeapi.LinuxContainerSecurityContext) string
		wantErr string
	}{
		{name: "defaults mask and protect /proc and /sys", check: func(sc *runtimeapi.LinuxContainerSecurityContext) string {
			if !reflect.DeepEqual(sc.MaskedPaths, defaultMaskedPaths) || !reflect.DeepEqual(sc.ReadonlyPaths, defaultReadonlyPaths) ||
				sc.Privileged || sc.Seccomp != nil || sc.Apparmor != nil || sc.Capabilities != nil {
				return fmt.Sprintf("%v", sc)
			}
			return ""
		}},
		{name: "privileged: nothing masked", csc: &v1.SecurityContext{Privileged: ptr(true)}, check: func(sc *runtimeapi.LinuxContainerSecurityContext) string {
			if !sc.Privileged || sc.MaskedPaths != nil || sc.ReadonlyPaths != nil {
				return fmt.Sprintf("%v", sc)
			}
			return ""
		}},
		{name: "unmasked procMount", csc: &v1.SecurityContext{ProcMount: ptr(v1.UnmaskedProcMount)}, check: func(sc *runtimeapi.LinuxContainerSecurityContext) string {
			if sc.MaskedPaths != nil {
				return "masked"
			}
			return ""
		}},
		{name: "container user and group over the pod's", psc: &v1.PodSecurityContext{RunAsUser: ptr(int64(1)), RunAsGroup: ptr(int64(2)), SupplementalGroups: []int64{5}},
			csc: &v1.SecurityContext{RunAsUser: ptr(int64(10))}, check: func(sc *runtimeapi.LinuxContainerSecurityContext) string {
				if sc.RunAsUser.GetValue() != 10 || sc.RunAsGroup.GetValue() != 2 || !reflect.DeepEqual(sc.SupplementalGroups, []int64{5}) {
					return fmt.Sprintf("%v", sc)
				}
				return ""
			}},
		{name: "read-only root, no new privileges, capabilities", csc: &v1.SecurityContext{ReadOnlyRootFilesystem: ptr(true),
			AllowPrivilegeEscalation: ptr(false), Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}}},
			check: func(sc *runtimeapi.LinuxContainerSecurityContext) string {
				if !sc.ReadonlyRootfs || !sc.NoNewPrivs || fmt.Sprint(sc.Capabilities.AddCapabilities, sc.Capabilities.DropCapabilities) != "[NET_ADMIN] [ALL]" {
					return fmt.Sprintf("%v", sc)
				}
				return ""
			}},
		{name: "pod seccomp", psc: &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}},
			check: func(sc *runtimeapi.LinuxContainerSecurityContext) string {
				if sc.Seccomp.GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault {
					return fmt.Sprintf("%v", sc.Seccomp)
				}
				return ""
			}},
		{name: "container seccomp over the pod's, under the seccomp root",
			psc: &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}},
			csc: &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr("p.json")}},
			check: func(sc *runtimeapi.LinuxContainerSecurityContext) string {
				if sc.Seccomp.GetProfileType() != runtimeapi.SecurityProfile_Localhost || sc.Seccomp.GetLocalhostRef() != root+"/p.json" {
					return fmt.Sprintf("%v", sc.Seccomp)
				}
				return ""
			}},
		{name: "pod seccomp escaping the root", psc: &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr("../x")}},
			wantErr: "pod securityContext.seccompProfile"},
		{name: "AppArmor from the pod", psc: &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}},
			check: func(sc *runtimeapi.LinuxContainerSecurityContext) string {
				if sc.Apparmor.GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault {
					return fmt.Sprintf("%v", sc.Apparmor)
				}
				return ""
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod(func(p *v1.Pod) { p.Spec.SecurityContext = tt.psc; p.Spec.Containers[0].SecurityContext = tt.csc })
			sc, err := ContainerSecurityContext(pod, &pod.Spec.Containers[0], root, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrConfigRef) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sc.NamespaceOptions == nil {
				t.Error("no namespace options")
			}
			if msg := tt.check(sc); msg != "" {
				t.Errorf("security context: %s", msg)
			}
		})
	}
}

// Env resolves envFrom, env and the service variables in upstream's order, against lookups the caller gives.
func TestEnv(t *testing.T) {
	cms := map[string]*v1.ConfigMap{"cfg": {Data: map[string]string{"k": "cv", "K2": "x", "bad=name": "y"}}}
	secrets := map[string]*v1.Secret{"sec": {Data: map[string][]byte{"pw": []byte("s3cret")}}}
	lookupErr := errors.New("API down")
	src := EnvSources{
		Services: map[string]string{"SVC_HOST": "10.0.0.1", "A": "from-service"},
		ConfigMap: func(name string, opt bool) (*v1.ConfigMap, error) {
			if name == "down" {
				return nil, lookupErr
			}
			if cm, ok := cms[name]; ok || opt {
				return cm, nil
			}
			return nil, fmt.Errorf("%w: configmap %q not found", ErrConfigRef, name)
		},
		Secret: func(name string, opt bool) (*v1.Secret, error) {
			if s, ok := secrets[name]; ok || opt {
				return s, nil
			}
			return nil, fmt.Errorf("%w: secret %q not found", ErrConfigRef, name)
		},
		Node: func() podfacts.NodeFacts {
			return podfacts.NodeFacts{NodeName: "node1", HostIPs: []string{"192.168.1.2"}, PodIPs: []string{"10.88.0.9"}}
		},
	}
	cmRef := func(name, key string, opt bool) *v1.EnvVarSource {
		return &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: &opt}}
	}
	field := func(path string) *v1.EnvVarSource {
		return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}
	}
	for _, tt := range []struct {
		name    string
		env     []v1.EnvVar
		from    []v1.EnvFromSource
		want    string
		wantErr error
	}{
		{name: "service variables only, sorted", want: "A=from-service;SVC_HOST=10.0.0.1"},
		{name: "plain and expansion", env: []v1.EnvVar{{Name: "X", Value: "1"}, {Name: "Y", Value: "$(X)-$(NOPE)-$$(X)-$(SVC_HOST)"}},
			want: "X=1;Y=1-$(NOPE)-$(X)-10.0.0.1;A=from-service;SVC_HOST=10.0.0.1"},
		{name: "own variable wins over the service's", env: []v1.EnvVar{{Name: "A", Value: "mine"}}, want: "A=mine;SVC_HOST=10.0.0.1"},
		{name: "configmap and secret keys", env: []v1.EnvVar{{Name: "C", ValueFrom: cmRef("cfg", "k", false)},
			{Name: "P", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "pw"}}}},
			want: "C=cv;P=s3cret;A=from-service;SVC_HOST=10.0.0.1"},
		{name: "missing key", env: []v1.EnvVar{{Name: "C", ValueFrom: cmRef("cfg", "nope", false)}}, wantErr: ErrConfigRef},
		{name: "missing optional key", env: []v1.EnvVar{{Name: "C", ValueFrom: cmRef("cfg", "nope", true)}}, want: "A=from-service;SVC_HOST=10.0.0.1"},
		{name: "missing configmap", env: []v1.EnvVar{{Name: "C", ValueFrom: cmRef("other", "k", false)}}, wantErr: ErrConfigRef},
		{name: "a lookup's error as it is", env: []v1.EnvVar{{Name: "C", ValueFrom: cmRef("down", "k", false)}}, wantErr: lookupErr},
		{name: "downward API", env: []v1.EnvVar{{Name: "N", ValueFrom: field("metadata.name")}, {Name: "IP", ValueFrom: field("status.podIP")},
			{Name: "H", ValueFrom: field("status.hostIP")}, {Name: "NODE", ValueFrom: field("spec.nodeName")}},
			want: "N=web;IP=10.88.0.9;H=192.168.1.2;NODE=node1;A=from-service;SVC_HOST=10.0.0.1"},
		{name: "bad field path", env: []v1.EnvVar{{Name: "N", ValueFrom: field("metadata.nope")}}, wantErr: ErrConfigRef},
		{name: "resource field", env: []v1.EnvVar{{Name: "MEM", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{
			Resource: "requests.memory", Divisor: resource.MustParse("1Mi")}}}}, want: "MEM=64;A=from-service;SVC_HOST=10.0.0.1"},
		{name: "envFrom with prefix, invalid names dropped, env wins",
			from: []v1.EnvFromSource{{Prefix: "P_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
			env:  []v1.EnvVar{{Name: "P_k", Value: "override"}},
			want: "P_K2=x;P_k=override;A=from-service;SVC_HOST=10.0.0.1"},
		{name: "envFrom optional secret missing",
			from: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "none"}, Optional: ptr(true)}}},
			want: "A=from-service;SVC_HOST=10.0.0.1"},
		{name: "envFrom secret", from: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}}},
			want: "pw=s3cret;A=from-service;SVC_HOST=10.0.0.1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod(nil)
			c := &pod.Spec.Containers[0]
			c.Env, c.EnvFrom = tt.env, tt.from
			c.Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}
			got, err := Env(pod, c, src)
			if !errors.Is(err, tt.wantErr) { // errors.Is(nil, nil) holds
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			} else if err != nil {
				return
			}
			var parts []string
			for _, kv := range got {
				parts = append(parts, kv.Key+"="+kv.Value)
			}
			if len(tt.from) > 0 { // a configMap's keys come in map order
				n := len(parts) - 2
				sort.Strings(parts[:n])
			}
			if s := strings.Join(parts, ";"); s != tt.want {
				t.Errorf("env %q, want %q", s, tt.want)
			}
		})
	}
}

func TestExpandAll(t *testing.T) {
	env := []*runtimeapi.KeyValue{{Key: "A", Value: "1"}, {Key: "B", Value: "two"}}
	for _, tt := range []struct{ in, want []string }{
		{in: nil, want: nil},
		{in: []string{"$(A)", "x$(B)y", "$(C)", "$$(A)", "$(A", "$"}, want: []string{"1", "xtwoy", "$(C)", "$(A)", "$(A", "$"}},
	} {
		if got := ExpandAll(tt.in, env); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ExpandAll(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestContainerLabelsAndAnnotations(t *testing.T) {
	pod := testPod(nil)
	c := &pod.Spec.Containers[0]
	c.TerminationMessagePath, c.TerminationMessagePolicy = "/dev/termination-log", v1.TerminationMessageFallbackToLogsOnError
	c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"stop"}}}}
	c.Ports = []v1.ContainerPort{{ContainerPort: 80}}
	wantLabels := map[string]string{"io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "ns", "io.kubernetes.pod.uid": "u1",
		"io.kubernetes.container.name": "app", podfacts.LabelContainerType: KindSidecar}
	if got := ContainerLabels(pod, "app", KindSidecar); !reflect.DeepEqual(got, wantLabels) {
		t.Errorf("labels %v, want %v", got, wantLabels)
	}
	a := ContainerAnnotations(pod, c, 3, "/pods/u1/containers/app/3-termination-log", 45)
	ports, _ := json.Marshal(c.Ports)
	for key, want := range map[string]string{
		podfacts.AnnotationContainerHash:              HashContainer(c),
		podfacts.AnnotationContainerRestartCount:      "3",
		podfacts.AnnotationTerminationMessagePath:     "/dev/termination-log",
		podfacts.AnnotationTerminationMessagePolicy:   "FallbackToLogsOnError",
		podfacts.AnnotationPodTerminationGracePeriod:  "45",
		podfacts.AnnotationTerminationMessageHostPath: "/pods/u1/containers/app/3-termination-log",
		podfacts.AnnotationContainerPorts:             string(ports),
	} {
		if a[key] != want {
			t.Errorf("annotation %s = %q, want %q", key, a[key], want)
		}
	}
	if h := PreStopFromAnnotations(a); h == nil || !reflect.DeepEqual(h.Exec.Command, []string{"stop"}) {
		t.Errorf("preStop from annotations %v", h)
	}
	if PreStopFromAnnotations(map[string]string{}) != nil || PreStopFromAnnotations(map[string]string{podfacts.AnnotationPreStopHandler: "{"}) != nil {
		t.Error("a preStop hook from nothing")
	}
	if _, ok := ContainerAnnotations(pod, &v1.Container{Name: "x"}, 0, "", 30)[podfacts.AnnotationTerminationMessageHostPath]; ok {
		t.Error("a host message path without a file")
	}
}

func TestContainerType(t *testing.T) {
	for kind, want := range map[string]string{KindApp: "container", KindEphemeral: "ephemeral_container", KindInit: "init_container", KindSidecar: "init_container"} {
		if got := ContainerType(kind); got != want {
			t.Errorf("ContainerType(%s) = %s, want %s", kind, got, want)
		}
	}
}

// The hash is fixed for a given container (changing it restarts every running container after an upgrade),
// changes with the fields that restart a container, and not with those that change in place.
func TestHashContainer(t *testing.T) {
	base := func() *v1.Container {
		return &v1.Container{Name: "app", Image: "nginx:1", Command: []string{"run"}, Ports: []v1.ContainerPort{{ContainerPort: 80}}}
	}
	if got := HashContainer(base()); got != HashContainer(base()) {
		t.Fatal("hash not stable")
	}
	for _, tt := range []struct {
		name    string
		edit    func(*v1.Container)
		changes bool
	}{
		{"image", func(c *v1.Container) { c.Image = "nginx:2" }, true},
		{"args", func(c *v1.Container) { c.Args = []string{"-v"} }, true},
		{"env", func(c *v1.Container) { c.Env = []v1.EnvVar{{Name: "A", Value: "1"}} }, true},
		{"env source", func(c *v1.Container) {
			c.Env = []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}, true},
		{"mounts", func(c *v1.Container) { c.VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: "/v"}} }, true},
		{"host port", func(c *v1.Container) { c.Ports[0].HostPort = 8080 }, true},
		{"privileged", func(c *v1.Container) { c.SecurityContext = &v1.SecurityContext{Privileged: ptr(true)} }, true},
		{"restart policy", func(c *v1.Container) { c.RestartPolicy = ptr(v1.ContainerRestartPolicyAlways) }, true},
		{"resources", func(c *v1.Container) {
			c.Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
		}, false},
		{"probes", func(c *v1.Container) { c.LivenessProbe = &v1.Probe{PeriodSeconds: 5} }, false},
		{"image pull policy", func(c *v1.Container) { c.ImagePullPolicy = v1.PullAlways }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.edit(c)
			if changed := HashContainer(c) != HashContainer(base()); changed != tt.changes {
				t.Errorf("hash changed %v, want %v", changed, tt.changes)
			}
		})
	}
}

func TestContainerConfig(t *testing.T) {
	pod := testPod(func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(10)) })
	c := &pod.Spec.Containers[0]
	c.Command, c.Args, c.WorkingDir, c.Stdin, c.TTY = []string{"sh", "-c"}, []string{"echo $(GREETING)"}, "/w", true, true
	env := []*runtimeapi.KeyValue{{Key: "GREETING", Value: "hi"}}
	mounts := []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/h"}}
	res := &runtimeapi.LinuxContainerResources{CpuShares: 2}
	sc := &runtimeapi.LinuxContainerSecurityContext{Privileged: true}
	cfg := ContainerConfig(ContainerInput{Pod: pod, Container: c, Kind: KindApp, RestartCount: 2, ImageRef: "sha256:abc",
		Env: env, Mounts: mounts, GracePeriod: 10, Resources: res, SecurityContext: sc})
	if cfg.Metadata.Name != "app" || cfg.Metadata.Attempt != 2 || cfg.Image.Image != "sha256:abc" || cfg.Image.UserSpecifiedImage != "nginx" {
		t.Errorf("metadata %v image %v", cfg.Metadata, cfg.Image)
	}
	if fmt.Sprint(cfg.Command, cfg.Args) != "[sh -c] [echo hi]" || cfg.WorkingDir != "/w" || !cfg.Stdin || cfg.StdinOnce || !cfg.Tty {
		t.Errorf("command %v args %v dir %q stdin %v tty %v", cfg.Command, cfg.Args, cfg.WorkingDir, cfg.Stdin, cfg.Tty)
	}
	if cfg.LogPath != "app/2.log" || !reflect.DeepEqual(cfg.Envs, env) || !reflect.DeepEqual(cfg.Mounts, mounts) {
		t.Errorf("log path %q envs %v mounts %v", cfg.LogPath, cfg.Envs, cfg.Mounts)
	}
	if cfg.Linux.Resources != res || cfg.Linux.SecurityContext != sc {
		t.Error("resources or security context not passed on")
	}
	if cfg.Labels[podfacts.LabelContainerType] != KindApp || cfg.Annotations[podfacts.AnnotationPodTerminationGracePeriod] != "10" {
		t.Errorf("labels %v annotations %v", cfg.Labels, cfg.Annotations)
	}
}

// In a user namespace every mount carries the pod's mappings; on the host's users none.
func TestContainerConfigUserNamespaceMounts(t *testing.T) {
	pod := testPod(func(p *v1.Pod) { p.Spec.HostUsers = ptr(false) })
	ids := []*runtimeapi.IDMapping{{HostId: 131072, ContainerId: 0, Length: 65536}}
	userns := &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids, Gids: ids}
	sc, err := ContainerSecurityContext(pod, &pod.Spec.Containers[0], "/seccomp", userns)
	if err != nil {
		t.Fatal(err)
	}
	mounts := []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/h"}, {ContainerPath: "/etc/hosts", HostPath: "/e"}}
	cfg := ContainerConfig(ContainerInput{Pod: pod, Container: &pod.Spec.Containers[0], Kind: KindApp, Mounts: mounts, SecurityContext: sc})
	for _, m := range cfg.Mounts {
		if len(m.UidMappings) != 1 || m.UidMappings[0].HostId != 131072 || len(m.GidMappings) != 1 || m.GidMappings[0].HostId != 131072 {
			t.Errorf("mount %s: uid mappings %v gid mappings %v", m.ContainerPath, m.UidMappings, m.GidMappings)
		}
	}
	plain := testPod(nil)
	psc, _ := ContainerSecurityContext(plain, &plain.Spec.Containers[0], "/seccomp", nil)
	cfg = ContainerConfig(ContainerInput{Pod: plain, Container: &plain.Spec.Containers[0], Kind: KindApp,
		Mounts: []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/h"}}, SecurityContext: psc})
	if m := cfg.Mounts[0]; m.UidMappings != nil || m.GidMappings != nil {
		t.Errorf("a pod on the host's users got mappings %v %v", m.UidMappings, m.GidMappings)
	}
}

func TestPropagation(t *testing.T) {
	for _, tt := range []struct {
		in   *v1.MountPropagationMode
		want runtimeapi.MountPropagation
	}{
		{nil, runtimeapi.MountPropagation_PROPAGATION_PRIVATE},
		{ptr(v1.MountPropagationNone), runtimeapi.MountPropagation_PROPAGATION_PRIVATE},
		{ptr(v1.MountPropagationHostToContainer), runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		{ptr(v1.MountPropagationBidirectional), runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
	} {
		if got := Propagation(tt.in); got != tt.want {
			t.Errorf("Propagation(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestContainerResources(t *testing.T) {
	for _, tt := range []struct {
		name                  string
		req, lim              v1.ResourceList
		shares, quota, memory int64
	}{
		{name: "nothing set: the least shares", shares: 2},
		{name: "request sets shares", req: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")}, shares: 512},
		{name: "limit alone sets shares and quota", lim: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("1Mi")},
			shares: 256, quota: 25000, memory: 1 << 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod(func(p *v1.Pod) {
				p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: tt.req, Limits: tt.lim}
			})
			r := ContainerResources(pod, &pod.Spec.Containers[0], 8<<30)
			if r.CpuShares != tt.shares || r.CpuQuota != tt.quota || r.MemoryLimitInBytes != tt.memory {
				t.Errorf("shares %d quota %d memory %d, want %d %d %d", r.CpuShares, r.CpuQuota, r.MemoryLimitInBytes, tt.shares, tt.quota, tt.memory)
			}
			if want := int64(podfacts.ContainerOOMScoreAdj(pod, &pod.Spec.Containers[0], 8<<30)); r.OomScoreAdj != want {
				t.Errorf("OOM score adj %d, want %d", r.OomScoreAdj, want)
			}
		})
	}
}

func TestEnrichTermination(t *testing.T) {
	log := []byte("2025-01-01T00:00:00Z stdout F first line\n2025-01-01T00:00:01Z stderr P part \n2025-01-01T00:00:01Z stderr F one\n")
	for _, tt := range []struct {
		name     string
		code     int32
		policy   v1.TerminationMessagePolicy
		file     string
		reason   string
		previous string
		want     string
	}{
		{name: "the file", code: 0, policy: v1.TerminationMessageFallbackToLogsOnError, file: "written by the app", want: "written by the app"},
		{name: "the log's tail on failure", code: 1, policy: v1.TerminationMessageFallbackToLogsOnError, want: "first line\npart one"},
		{name: "no fallback on success", code: 0, policy: v1.TerminationMessageFallbackToLogsOnError},
		{name: "no fallback when the policy reads the file", code: 1, policy: v1.TerminationMessageReadFile},
		{name: "no fallback when it could not run", code: 1, policy: v1.TerminationMessageFallbackToLogsOnError, reason: "ContainerCannotRun"},
		{name: "added to the runtime's message", code: 0, policy: v1.TerminationMessageReadFile, file: "bye", previous: "oom", want: "oom: bye"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cs := &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: tt.code, LogPath: "0.log", Reason: tt.reason,
				Message: tt.previous, Annotations: map[string]string{podfacts.AnnotationTerminationMessageHostPath: "msg",
					podfacts.AnnotationTerminationMessagePolicy: string(tt.policy)}}
			EnrichTermination(cs, TerminationFiles{
				Head:    func(path string, n int64) string { return tt.file },
				LogTail: func(path string) []byte { return log },
			})
			want := tt.want
			if want == "" {
				want = tt.previous
			}
			if cs.Message != want {
				t.Errorf("message %q, want %q", cs.Message, want)
			}
		})
	}
	running := &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	EnrichTermination(running, TerminationFiles{})
	if running.Message != "" {
		t.Errorf("a running container's message %q", running.Message)
	}
}

func TestCRILogTailLimits(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "t stdout F line %d\n", i)
	}
	got := criLogTail([]byte(b.String()), 80, 2048)
	lines := strings.Split(got, "\n")
	if len(lines) != 80 || lines[0] != "line 20" || lines[79] != "line 99" {
		t.Errorf("%d lines, first %q last %q", len(lines), lines[0], lines[len(lines)-1])
	}
	if got := criLogTail([]byte(b.String()), 80, 10); got != "98\nline 99" {
		t.Errorf("cut to 10 bytes: %q", got)
	}
}

func TestTerminationMessageFile(t *testing.T) {
	if got := TerminationMessageFile("/var/lib/kubelet/pods/u1", "app", 3); got != "/var/lib/kubelet/pods/u1/containers/app/3-termination-log" {
		t.Errorf("got %q", got)
	}
}

func TestHashStable(t *testing.T) {
	c := &v1.Container{Name: "app", Image: "busybox:1.35", Command: []string{"sh"}, Args: []string{"-c", "sleep 1"},
		Env: []v1.EnvVar{{Name: "A", Value: "1"}}}
	// A fixed value: a change here means every container restarts after an upgrade.
	if got := HashContainer(c); got != "324dad9adfc2f1fe" {
		t.Errorf("hash %s changed: every running container would restart after an upgrade", got)
	}
	before := HashContainer(c)
	c2 := c.DeepCopy()
	c2.ImagePullPolicy = v1.PullAlways
	c2.Resources.Limits = v1.ResourceList{v1.ResourceCPU: {}}
	c2.ReadinessProbe = &v1.Probe{}
	if HashContainer(c2) != before {
		t.Error("hash changed on a field that does not restart containers")
	}
	c2.Args = []string{"-c", "sleep 2"}
	if HashContainer(c2) == before {
		t.Error("hash did not change with args")
	}
}

func TestRecursiveReadOnly(t *testing.T) {
	mode := func(m v1.RecursiveReadOnlyMode) *v1.RecursiveReadOnlyMode { return &m }
	bidi := v1.MountPropagationBidirectional
	none := v1.MountPropagationNone
	for _, tc := range []struct {
		name     string
		mount    v1.VolumeMount
		supports bool
		want     bool
		wantErr  string
	}{
		{name: "unset", mount: v1.VolumeMount{Name: "v", ReadOnly: true}, supports: true},
		{name: "disabled", mount: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyDisabled)}, supports: true},
		{name: "enabled", mount: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled), MountPropagation: &none},
			supports: true, want: true},
		{name: "enabled, not supported", mount: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled)},
			wantErr: `volume "v" requested recursive read-only mode, but it is not supported by the runtime`},
		{name: "if possible", mount: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyIfPossible)}, supports: true, want: true},
		{name: "if possible, not supported", mount: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyIfPossible)}},
		{name: "not read-only", mount: v1.VolumeMount{Name: "v", RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled)}, supports: true,
			wantErr: `volume "v" requested recursive read-only mode, but it is not read-only`},
		{name: "propagation", mount: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyIfPossible), MountPropagation: &bidi},
			supports: true, wantErr: `not compatible with propagation "Bidirectional"`},
		{name: "unknown", mount: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: mode("Sometimes")}, supports: true,
			wantErr: `unknown recursive read-only mode "Sometimes"`},
	} {
		got, err := RecursiveReadOnly(&tc.mount, tc.supports)
		if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %v, %v; want %v, %q", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

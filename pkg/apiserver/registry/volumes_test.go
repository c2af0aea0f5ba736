package registry

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func hostPathPV(mod func(*corev1.PersistentVolumeSpec)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1", ResourceVersion: "1"}, Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}}}
	if mod != nil {
		mod(&pv.Spec)
	}
	return pv
}

func errText(errs field.ErrorList) string { return errs.ToAggregate().Error() }

// A new volume gets kube-apiserver's defaults and starts Pending; its spec is validated as upstream's.
func TestPersistentVolumeStrategy(t *testing.T) {
	pv := hostPathPV(nil)
	pv.Status.Phase = corev1.VolumeBound
	persistentVolumeStrategy{}.PrepareForCreate(pv)
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || *pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem ||
		*pv.Spec.HostPath.Type != corev1.HostPathUnset || pv.Status.Phase != corev1.VolumePending {
		t.Errorf("defaults: %+v", pv)
	}
	for _, tc := range []struct {
		name    string
		mod     func(*corev1.PersistentVolumeSpec)
		wantErr string
	}{
		{"valid", nil, ""},
		{"no capacity", func(s *corev1.PersistentVolumeSpec) { s.Capacity = nil }, "spec.capacity[storage]: Required"},
		{"no access mode", func(s *corev1.PersistentVolumeSpec) { s.AccessModes = nil }, "spec.accessModes: Required"},
		{"ReadWriteOncePod with another", func(s *corev1.PersistentVolumeSpec) {
			s.AccessModes = append(s.AccessModes, corev1.ReadWriteOncePod)
		}, "may not use ReadWriteOncePod"},
		{"no source", func(s *corev1.PersistentVolumeSpec) { s.HostPath = nil }, "must specify a volume type"},
		{"two sources", func(s *corev1.PersistentVolumeSpec) { s.NFS = &corev1.NFSVolumeSource{Server: "s", Path: "/"} },
			"may not specify more than 1 volume type"},
		{"hostPath without a path", func(s *corev1.PersistentVolumeSpec) { s.HostPath.Path = "" }, "spec.hostPath.path: Required"},
		{"local without node affinity", func(s *corev1.PersistentVolumeSpec) {
			s.HostPath, s.Local = nil, &corev1.LocalVolumeSource{Path: "/mnt/disk"}
		}, "Local volume requires node affinity"},
		{"bad reclaim policy", func(s *corev1.PersistentVolumeSpec) { s.PersistentVolumeReclaimPolicy = "Keep" }, "persistentVolumeReclaimPolicy"},
		{"bad storage class", func(s *corev1.PersistentVolumeSpec) { s.StorageClassName = "Fast!" }, "spec.storageClassName"},
	} {
		pv := hostPathPV(tc.mod)
		persistentVolumeStrategy{}.PrepareForCreate(pv)
		errs := persistentVolumeStrategy{}.Validate(pv)
		if tc.wantErr == "" && len(errs) > 0 || tc.wantErr != "" && (len(errs) == 0 || !strings.Contains(errText(errs), tc.wantErr)) {
			t.Errorf("%s: %v", tc.name, errs)
		}
	}
	old := hostPathPV(nil)
	persistentVolumeStrategy{}.PrepareForCreate(old)
	changed := old.DeepCopy()
	changed.Spec.HostPath.Path = "/other"
	if errs := (persistentVolumeStrategy{}).ValidateUpdate(changed, old); !strings.Contains(errText(errs), "immutable") {
		t.Errorf("source changed: %v", errs)
	}
	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{"a": "b"}
	if errs := (persistentVolumeStrategy{}).ValidateUpdate(relabelled, old); len(errs) > 0 {
		t.Errorf("labels changed: %v", errs)
	}
}

func claim(mod func(*corev1.PersistentVolumeClaimSpec)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data", ResourceVersion: "1"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if mod != nil {
		mod(&c.Spec)
	}
	return c
}

// A claim starts Pending; its spec is fixed but for its volume (set once) and a larger request once bound.
func TestPersistentVolumeClaimStrategy(t *testing.T) {
	s := persistentVolumeClaimStrategy{}
	for _, tc := range []struct {
		name    string
		mod     func(*corev1.PersistentVolumeClaimSpec)
		wantErr string
	}{
		{"valid", nil, ""},
		{"no request", func(s *corev1.PersistentVolumeClaimSpec) { s.Resources.Requests = nil }, "spec.resources.requests[storage]: Required"},
		{"zero request", func(s *corev1.PersistentVolumeClaimSpec) {
			s.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("0")
		}, "must be greater than zero"},
		{"no access mode", func(s *corev1.PersistentVolumeClaimSpec) { s.AccessModes = nil }, "spec.accessModes: Required"},
		{"bad volume mode", func(s *corev1.PersistentVolumeClaimSpec) { s.VolumeMode = ptr.To(corev1.PersistentVolumeMode("Raw")) }, "spec.volumeMode"},
	} {
		c := claim(tc.mod)
		s.PrepareForCreate(c)
		errs := s.Validate(c)
		if tc.wantErr == "" && len(errs) > 0 || tc.wantErr != "" && (len(errs) == 0 || !strings.Contains(errText(errs), tc.wantErr)) {
			t.Errorf("%s: %v", tc.name, errs)
		}
	}
	old := claim(nil)
	s.PrepareForCreate(old)
	if old.Status.Phase != corev1.ClaimPending || *old.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("defaults %+v", old)
	}
	bound := old.DeepCopy()
	bound.Spec.VolumeName = "pv1"
	if errs := s.ValidateUpdate(bound, old); len(errs) > 0 {
		t.Errorf("binding: %v", errs)
	}
	rebound := bound.DeepCopy()
	rebound.Spec.VolumeName = "pv2"
	if errs := s.ValidateUpdate(rebound, bound); len(errs) == 0 {
		t.Error("rebinding allowed")
	}
	bigger := bound.DeepCopy()
	bigger.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	if errs := s.ValidateUpdate(bigger, bound); len(errs) == 0 {
		t.Error("a Pending claim grew")
	}
	bound.Status.Phase = corev1.ClaimBound
	if errs := s.ValidateUpdate(bigger, bound); len(errs) > 0 {
		t.Errorf("a Bound claim grew: %v", errs)
	}
	smaller := bound.DeepCopy()
	smaller.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1Mi")
	if errs := s.ValidateUpdate(smaller, bound); len(errs) == 0 {
		t.Error("a Bound claim shrank")
	}
}

// Services get kube-apiserver's defaults and validation.
func TestServiceStrategy(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 80}},
			SessionAffinity: corev1.ServiceAffinityClientIP}}
	serviceStrategy{}.PrepareForCreate(svc)
	s := svc.Spec
	if s.Type != corev1.ServiceTypeClusterIP || s.Ports[0].Protocol != corev1.ProtocolTCP || s.Ports[0].TargetPort != intstr.FromInt32(80) ||
		*s.SessionAffinityConfig.ClientIP.TimeoutSeconds != 10800 || *s.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyCluster {
		t.Errorf("defaults %+v", s)
	}
	for _, tc := range []struct {
		name    string
		mod     func(*corev1.ServiceSpec)
		wantErr string
	}{
		{"valid", nil, ""},
		{"no ports", func(s *corev1.ServiceSpec) { s.Ports = nil }, "spec.ports: Required"},
		{"headless without ports", func(s *corev1.ServiceSpec) { s.Ports, s.ClusterIP = nil, corev1.ClusterIPNone }, ""},
		{"two ports without names", func(s *corev1.ServiceSpec) {
			s.Ports = append(s.Ports, corev1.ServicePort{Port: 81, Protocol: "TCP",
				TargetPort: intstr.FromInt32(81)})
		}, "spec.ports[0].name: Required"},
		{"a bad port", func(s *corev1.ServiceSpec) { s.Ports[0].Port = 70000 }, "spec.ports[0].port"},
		{"a bad protocol", func(s *corev1.ServiceSpec) { s.Ports[0].Protocol = "HTTP" }, "spec.ports[0].protocol"},
		{"a node port on a ClusterIP service", func(s *corev1.ServiceSpec) { s.Ports[0].NodePort = 30000 }, "may not be used when `type` is 'ClusterIP'"},
		{"a bad type", func(s *corev1.ServiceSpec) { s.Type = "Ingress" }, "spec.type"},
		{"ExternalName with a cluster IP", func(s *corev1.ServiceSpec) { s.Type, s.ExternalName = corev1.ServiceTypeExternalName, "x.example" },
			"may not be set for ExternalName services"},
		{"a bad selector", func(s *corev1.ServiceSpec) { s.Selector = map[string]string{"a b": "c"} }, "spec.selector"},
	} {
		svc := svc.DeepCopy()
		if tc.mod != nil {
			tc.mod(&svc.Spec)
		}
		errs := serviceStrategy{}.Validate(svc)
		if tc.wantErr == "" && len(errs) > 0 || tc.wantErr != "" && (len(errs) == 0 || !strings.Contains(errText(errs), tc.wantErr)) {
			t.Errorf("%s: %v", tc.name, errs)
		}
	}
	moved := svc.DeepCopy()
	moved.Spec.ClusterIP, moved.Spec.ClusterIPs = "10.96.0.11", []string{"10.96.0.11"}
	if errs := (serviceStrategy{}).ValidateUpdate(moved, svc); !strings.Contains(errText(errs), "may not change once set") {
		t.Errorf("cluster IP changed: %v", errs)
	}
}

func TestCSIVolumeSourcesValidated(t *testing.T) {
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	pv := func(driver, handle string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{
			Capacity: size, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}}}}
	}
	for _, tc := range []struct {
		pv   *corev1.PersistentVolume
		want string
	}{
		{pv("hostpath.csi.k8s.io", "vol-1"), ""},
		{pv("", "vol-1"), "spec.csi.driver: Required value"},
		{pv("../evil", "vol-1"), "spec.csi.driver: Invalid value"},
		{pv("hostpath.csi.k8s.io", ""), "spec.csi.volumeHandle: Required value"},
	} {
		got := (persistentVolumeStrategy{}).Validate(tc.pv).ToAggregate()
		if (got == nil) != (tc.want == "") || (got != nil && !strings.Contains(got.Error(), tc.want)) {
			t.Errorf("driver %q handle %q: %v, want %q", tc.pv.Spec.CSI.Driver, tc.pv.Spec.CSI.VolumeHandle, got, tc.want)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "i"}}, RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
		Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "Bad_Driver"}}}}}}
	if got := (podStrategy{}).Validate(pod).ToAggregate(); got == nil || !strings.Contains(got.Error(), "spec.volumes[0].csi.driver: Invalid value") {
		t.Errorf("an inline csi volume of a bad driver name: %v", got)
	}
}

func TestRecursiveReadOnlyValidated(t *testing.T) {
	mode := func(m corev1.RecursiveReadOnlyMode) *corev1.RecursiveReadOnlyMode { return &m }
	bidi := corev1.MountPropagationBidirectional
	for _, tc := range []struct {
		mount corev1.VolumeMount
		want  string
	}{
		{corev1.VolumeMount{Name: "v", MountPath: "/v", ReadOnly: true, RecursiveReadOnly: mode(corev1.RecursiveReadOnlyEnabled)}, ""},
		{corev1.VolumeMount{Name: "v", MountPath: "/v", RecursiveReadOnly: mode(corev1.RecursiveReadOnlyDisabled)}, ""},
		{corev1.VolumeMount{Name: "v", MountPath: "/v", RecursiveReadOnly: mode(corev1.RecursiveReadOnlyIfPossible)},
			"recursiveReadOnly: Forbidden: may only be specified when readOnly is true"},
		{corev1.VolumeMount{Name: "v", MountPath: "/v", ReadOnly: true, MountPropagation: &bidi, RecursiveReadOnly: mode(corev1.RecursiveReadOnlyEnabled)},
			"may only be specified when mountPropagation is None or not specified"},
		{corev1.VolumeMount{Name: "v", MountPath: "/v", ReadOnly: true, RecursiveReadOnly: mode("Always")}, `Unsupported value: "Always"`},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "i", VolumeMounts: []corev1.VolumeMount{tc.mount},
				ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
			Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}
		got := (podStrategy{}).Validate(pod).ToAggregate()
		if (got == nil) != (tc.want == "") || (got != nil && !strings.Contains(got.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.mount, got, tc.want)
		}
	}
}

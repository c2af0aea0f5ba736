package auth

import (
	"context"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

// volumePods are pods on n1 and n2 that refer to objects in every way a pod can, plus the persistent volumes
// their claims are bound to.
type volumePods struct {
	fakePods
	pvs map[string]*corev1.PersistentVolume
}

func (v volumePods) PersistentVolume(name string) (*corev1.PersistentVolume, bool) {
	pv, ok := v.pvs[name]
	return pv, ok
}

func (v volumePods) Pod(ns, name string) (*corev1.Pod, error) {
	for _, pods := range v.fakePods {
		for _, p := range pods {
			if p.Namespace == ns && p.Name == name {
				return p, nil
			}
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}

func testVolumePods() volumePods {
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "web-uid"},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "web-sa",
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
			Volumes: []corev1.Volume{
				{Name: "api", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "vault", Audience: "vault"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-cm"}}},
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-sec"}}}}}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
				{Name: "csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d",
					NodePublishSecretRef: &corev1.LocalObjectReference{Name: "csi-sec"}}}},
			},
			Containers: []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "envfrom-cm"}}}}}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug",
				Env: []corev1.EnvVar{{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "debug-sec"}, Key: "k"}}}}}}},
		}}
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "static",
		Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "h"}},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "mirror-sa", Volumes: []corev1.Volume{
			{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "mirror-cm"}}}}}}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db", UID: "db-uid"},
		Spec: corev1.PodSpec{NodeName: "n2", ServiceAccountName: "db-sa", Volumes: []corev1.Volume{
			{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "db-data"}}}}}}
	claimRef := func(ns, name string) *corev1.ObjectReference {
		return &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: name}
	}
	return volumePods{
		fakePods: fakePods{"n1": {web, mirror}, "n2": {other}},
		pvs: map[string]*corev1.PersistentVolume{
			"pv-data":    {ObjectMeta: metav1.ObjectMeta{Name: "pv-data"}, Spec: corev1.PersistentVolumeSpec{ClaimRef: claimRef("default", "data")}},
			"pv-db":      {ObjectMeta: metav1.ObjectMeta{Name: "pv-db"}, Spec: corev1.PersistentVolumeSpec{ClaimRef: claimRef("default", "db-data")}},
			"pv-free":    {ObjectMeta: metav1.ObjectMeta{Name: "pv-free"}},
			"pv-data-ns": {ObjectMeta: metav1.ObjectMeta{Name: "pv-data-ns"}, Spec: corev1.PersistentVolumeSpec{ClaimRef: claimRef("other", "data")}},
		},
	}
}

// What a node may read and write of the objects its pods use, as upstream's Node authorizer decides it.
func TestNodeMayUseWhatItsPodsUse(t *testing.T) {
	a := NewAuthorizer(testVolumePods())
	for _, tc := range []struct {
		name  string
		info  *request.Info
		allow bool
	}{
		{"token for its pod's service account", res("create", "", "serviceaccounts", "token", "default", "web-sa"), true},
		{"token for another node's pod's service account", res("create", "", "serviceaccounts", "token", "default", "db-sa"), false},
		{"token for its mirror pod's service account", res("create", "", "serviceaccounts", "token", "default", "mirror-sa"), false},
		{"token of no service account", res("create", "", "serviceaccounts", "token", "default", ""), false},
		{"get of the token subresource", res("get", "", "serviceaccounts", "token", "default", "web-sa"), false},
		{"update of its pod's service account", res("update", "", "serviceaccounts", "", "default", "web-sa"), false},
		{"configmap of a projected volume", res("get", "", "configmaps", "", "default", "proj-cm"), true},
		{"secret of a projected volume", res("get", "", "secrets", "", "default", "proj-sec"), true},
		{"configmap of envFrom", res("get", "", "configmaps", "", "default", "envfrom-cm"), true},
		{"image pull secret", res("get", "", "secrets", "", "default", "pull"), true},
		{"secret of an ephemeral container's env", res("get", "", "secrets", "", "default", "debug-sec"), true},
		{"secret of a CSI volume", res("get", "", "secrets", "", "default", "csi-sec"), true},
		{"configmap of a mirror pod", res("get", "", "configmaps", "", "default", "mirror-cm"), false},
		{"watch of a referenced configmap", withSelector(res("watch", "", "configmaps", "", "default", "proj-cm"), ""), true},
		{"claim of its pod", res("get", "", "persistentvolumeclaims", "", "default", "data"), true},
		{"claim of its pod's ephemeral volume", res("get", "", "persistentvolumeclaims", "", "default", "web-scratch"), true},
		{"claim of another node's pod", res("get", "", "persistentvolumeclaims", "", "default", "db-data"), false},
		{"claim of its pod in another namespace", res("get", "", "persistentvolumeclaims", "", "other", "data"), false},
		{"list of claims", res("list", "", "persistentvolumeclaims", "", "default", ""), false},
		{"watch of its pod's claim", res("watch", "", "persistentvolumeclaims", "", "default", "data"), false},
		{"status update of its pod's claim", res("update", "", "persistentvolumeclaims", "status", "default", "data"), true},
		{"status patch of another node's claim", res("patch", "", "persistentvolumeclaims", "status", "default", "db-data"), false},
		{"update of its pod's claim", res("update", "", "persistentvolumeclaims", "", "default", "data"), false},
		{"volume bound to its pod's claim", res("get", "", "persistentvolumes", "", "", "pv-data"), true},
		{"volume bound to another node's claim", res("get", "", "persistentvolumes", "", "", "pv-db"), false},
		{"volume bound to a claim of the same name elsewhere", res("get", "", "persistentvolumes", "", "", "pv-data-ns"), false},
		{"unbound volume", res("get", "", "persistentvolumes", "", "", "pv-free"), false},
		{"missing volume", res("get", "", "persistentvolumes", "", "", "pv-none"), false},
		{"list of volumes", res("list", "", "persistentvolumes", "", "", ""), false},
		{"update of its volume", res("update", "", "persistentvolumes", "", "", "pv-data"), false},
		{"list of all services", res("list", "", "services", "", "", ""), true},
		{"watch of all services", res("watch", "", "services", "", "", ""), true},
		{"get of a service", res("get", "", "services", "", "default", "kubernetes"), true},
		{"update of a service", res("update", "", "services", "", "default", "kubernetes"), false},
		{"service status", res("patch", "", "services", "status", "default", "kubernetes"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := a.Decide(node1, tc.info); d.Allowed != tc.allow {
				t.Fatalf("allowed %v (%s), want %v", d.Allowed, d.Reason, tc.allow)
			}
		})
	}
}

func tokenRequest(pod, uid string, auds ...string) *authenticationv1.TokenRequest {
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: auds}}
	if pod != "" {
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod, UID: k8stypes.UID(uid)}
	}
	return tr
}

// A node's TokenRequest must be bound to its own pod, by name and UID, for an audience the pod projects, as
// upstream's NodeRestriction.
func TestNodeRestrictionTokenRequests(t *testing.T) {
	nr := NodeRestriction{Pods: testVolumePods()}
	sa := &registry.Resource{Version: "v1", Name: "serviceaccounts", Namespaced: true}
	for _, tc := range []struct {
		name    string
		tr      *authenticationv1.TokenRequest
		wantErr string
	}{
		{"bound to its pod", tokenRequest("web", "web-uid"), ""},
		{"bound to its pod, for a projected audience", tokenRequest("web", "web-uid", "vault"), ""},
		{"bound to its pod, for another audience", tokenRequest("web", "web-uid", "https://kubernetes.default.svc"), "not found in pod spec volume"},
		{"bound to its pod, for two audiences", tokenRequest("web", "web-uid", "vault", ""), "0 or 1 audiences"},
		{"bound to another node's pod", tokenRequest("db", "db-uid"), "scheduled on a different node"},
		{"bound to a missing pod", tokenRequest("gone", "x"), "not found"},
		{"bound to a recreated pod", tokenRequest("web", "old-uid"), "does not match the UID in record"},
		{"bound without a UID", tokenRequest("web", ""), "without a uid"},
		{"not bound", tokenRequest("", ""), "not bound to a pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := nr.Admit(context.Background(), &rest.Attributes{User: node1, Resource: sa, Object: tc.tr,
				Info: res("create", "", "serviceaccounts", "token", "default", "web-sa")})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("got %v, want %q", err, tc.wantErr)
			}
		})
	}
	// An admin's TokenRequest is not the plugin's business.
	if err := nr.Admit(context.Background(), &rest.Attributes{User: admin, Resource: sa, Object: tokenRequest("", ""),
		Info: res("create", "", "serviceaccounts", "token", "default", "web-sa")}); err != nil {
		t.Errorf("admin: %v", err)
	}
}

// csiStorage is the claims, volumes and CSIDrivers behind the web pod's volumes.
type csiStorage struct {
	claims  map[string]*corev1.PersistentVolumeClaim
	volumes map[string]*corev1.PersistentVolume
	drivers map[string]*storagev1.CSIDriver
}

func (s csiStorage) PersistentVolumeClaim(ns, name string) (*corev1.PersistentVolumeClaim, bool) {
	c, ok := s.claims[ns+"/"+name]
	return c, ok
}

func (s csiStorage) PersistentVolume(name string) (*corev1.PersistentVolume, bool) {
	v, ok := s.volumes[name]
	return v, ok
}

func (s csiStorage) CSIDriver(name string) (*storagev1.CSIDriver, bool) {
	d, ok := s.drivers[name]
	return d, ok
}

// A node may ask for a token of its pod for an audience the CSIDriver of one of the pod's volumes asks for
// (tokenRequests): an inline csi volume's driver, or the driver of the volume a claim or a generic ephemeral
// volume's claim is bound to; not for a driver the pod does not use.
func TestNodeRestrictionCSITokenAudiences(t *testing.T) {
	claim := func(name, volume string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}}
	}
	volume := func(name, driver string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver}}}}
	}
	driver := func(name, audience string) *storagev1.CSIDriver {
		return &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: storagev1.CSIDriverSpec{TokenRequests: []storagev1.TokenRequest{{Audience: audience}}}}
	}
	st := csiStorage{
		claims: map[string]*corev1.PersistentVolumeClaim{"default/data": claim("data", "pv-data"),
			"default/web-scratch": claim("web-scratch", "pv-scratch"), "default/db-data": claim("db-data", "pv-db")},
		volumes: map[string]*corev1.PersistentVolume{"pv-data": volume("pv-data", "disk.example"),
			"pv-scratch": volume("pv-scratch", "scratch.example"), "pv-db": volume("pv-db", "db.example")},
		drivers: map[string]*storagev1.CSIDriver{"d": driver("d", "inline-aud"), "disk.example": driver("disk.example", "disk-aud"),
			"scratch.example": driver("scratch.example", "scratch-aud"), "db.example": driver("db.example", "db-aud")},
	}
	sa := &registry.Resource{Version: "v1", Name: "serviceaccounts", Namespaced: true}
	for _, tc := range []struct {
		audience string
		storage  StorageGetter
		allow    bool
	}{
		{"inline-aud", st, true},
		{"disk-aud", st, true},
		{"scratch-aud", st, true},
		{"db-aud", st, false}, // another pod's volume
		{"inline-aud", nil, false},
	} {
		nr := NodeRestriction{Pods: testVolumePods(), Storage: tc.storage}
		err := nr.Admit(context.Background(), &rest.Attributes{User: node1, Resource: sa, Object: tokenRequest("web", "web-uid", tc.audience),
			Info: res("create", "", "serviceaccounts", "token", "default", "web-sa")})
		if (err == nil) != tc.allow {
			t.Errorf("audience %s (storage known: %v): %v, want allowed %v", tc.audience, tc.storage != nil, err, tc.allow)
		}
	}
}

// A node updates only the capacity, conditions and allocated resources of a claim's status.
func TestNodeRestrictionClaimStatus(t *testing.T) {
	old := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	for _, tc := range []struct {
		name  string
		mod   func(c *corev1.PersistentVolumeClaim)
		allow bool
	}{
		{"capacity", func(c *corev1.PersistentVolumeClaim) {
			c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
		}, true},
		{"a condition", func(c *corev1.PersistentVolumeClaim) {
			c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimResizing, Status: "True"}}
		}, true},
		{"the phase", func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimLost }, false},
		{"the access modes", func(c *corev1.PersistentVolumeClaim) {
			c.Status.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := old.DeepCopy()
			tc.mod(cur)
			err := NodeRestriction{}.Admit(context.Background(), &rest.Attributes{User: node1,
				Resource: &registry.Resource{Version: "v1", Name: "persistentvolumeclaims", Namespaced: true},
				Info:     res("update", "", "persistentvolumeclaims", "status", "default", "data"), Object: cur, Old: old})
			if tc.allow != (err == nil) {
				t.Fatalf("got %v, want allowed %v", err, tc.allow)
			}
		})
	}
}

// A node's mirror pod refers to nothing of the API, as upstream's HasAPIObjectReference decides.
func TestAPIObjectReference(t *testing.T) {
	vol := func(src corev1.VolumeSource) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: src}}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"nothing", vol(corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}), ""},
		{"downward API projection", vol(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{DownwardAPI: &corev1.DownwardAPIProjection{}}}}}), ""},
		{"service account", &corev1.Pod{Spec: corev1.PodSpec{ServiceAccountName: "default"}}, "serviceaccounts"},
		{"claim", vol(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}),
			"persistentvolumeclaims"},
		{"ephemeral volume", vol(corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}),
			"persistentvolumeclaims (via ephemeral volumes)"},
		{"token projection", vol(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t"}}}}}), "serviceaccounts (via projected volumes)"},
		{"configmap projection", vol(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}}}}), "configmaps"},
		{"CSI volume", vol(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d"}}), "csidrivers (via CSI volumes)"},
	} {
		if got := apiObjectReference(tc.pod); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

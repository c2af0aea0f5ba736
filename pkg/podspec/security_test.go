package podspec

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestVerifyRunAsNonRoot(t *testing.T) {
	yes, no := true, false
	root, user := int64(0), int64(1000)
	for _, tt := range []struct {
		name       string
		pod, ctr   *v1.SecurityContext
		imageUID   *int64
		imageUser  string
		wantErr    string
		needsImage bool
	}{
		{name: "not asked", imageUID: &root},
		{name: "pod asks, image root", pod: &v1.SecurityContext{RunAsNonRoot: &yes}, imageUID: &root, wantErr: "image will run as root", needsImage: true},
		{name: "pod asks, image without user", pod: &v1.SecurityContext{RunAsNonRoot: &yes}, wantErr: "image will run as root", needsImage: true},
		{name: "pod asks, image uid 1000", pod: &v1.SecurityContext{RunAsNonRoot: &yes}, imageUID: &user, needsImage: true},
		{name: "pod asks, image user by name", pod: &v1.SecurityContext{RunAsNonRoot: &yes}, imageUser: "nobody", wantErr: "non-numeric user (nobody)", needsImage: true},
		{name: "runAsUser 0", pod: &v1.SecurityContext{RunAsNonRoot: &yes, RunAsUser: &root}, wantErr: "runAsUser breaks non-root policy"},
		{name: "container runAsUser 0 over pod's", pod: &v1.SecurityContext{RunAsNonRoot: &yes, RunAsUser: &user}, ctr: &v1.SecurityContext{RunAsUser: &root}, wantErr: "runAsUser breaks"},
		{name: "runAsUser 1000, image root", pod: &v1.SecurityContext{RunAsNonRoot: &yes, RunAsUser: &user}, imageUID: &root},
		{name: "container lifts the pod's", pod: &v1.SecurityContext{RunAsNonRoot: &yes}, ctr: &v1.SecurityContext{RunAsNonRoot: &no}, imageUID: &root},
		{name: "container asks", ctr: &v1.SecurityContext{RunAsNonRoot: &yes}, imageUID: &root, wantErr: "image will run as root", needsImage: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
			if tt.pod != nil {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: tt.pod.RunAsNonRoot, RunAsUser: tt.pod.RunAsUser}
			}
			c := &v1.Container{Name: "c", SecurityContext: tt.ctr}
			if got := NeedsImageUser(pod, c); got != tt.needsImage {
				t.Errorf("NeedsImageUser = %v, want %v", got, tt.needsImage)
			}
			err := VerifyRunAsNonRoot(pod, c, tt.imageUID, tt.imageUser)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one with %q", err, tt.wantErr)
			case err != nil && !strings.Contains(err.Error(), `(pod: "p_ns(u)", container: c)`):
				t.Errorf("error %q does not name the pod and container as upstream does", err)
			}
		})
	}
}

func TestAppArmorProfile(t *testing.T) {
	local := "k8s-nginx"
	for _, tt := range []struct {
		name    string
		pod     *v1.AppArmorProfile
		ctr     *v1.AppArmorProfile
		ann     string
		want    *runtimeapi.SecurityProfile
		wantErr bool
	}{
		{name: "none"},
		{name: "pod runtime default", pod: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault},
			want: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}},
		{name: "container over pod", pod: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault},
			ctr:  &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &local},
			want: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: local}},
		{name: "annotation over pod", pod: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}, ann: "unconfined",
			want: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}},
		{name: "annotation localhost", ann: "localhost/k8s-nginx",
			want: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: local}},
		{name: "annotation garbage", ann: "enforce-me", wantErr: true},
		{name: "localhost without name", ctr: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost}, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{AppArmorProfile: tt.pod}}}
			if tt.ann != "" {
				pod.Annotations = map[string]string{v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "c": tt.ann}
			}
			c := &v1.Container{Name: "c", SecurityContext: &v1.SecurityContext{AppArmorProfile: tt.ctr}}
			got, err := appArmorProfile(pod, c)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if got.String() != tt.want.String() {
				t.Errorf("profile %v, want %v", got, tt.want)
			}
		})
	}
}

// A group without a user runs as the image's user, as upstream's kubelet sends it.
func TestUserFromImage(t *testing.T) {
	i64 := func(v int64) *runtimeapi.Int64Value { return &runtimeapi.Int64Value{Value: v} }
	uid := int64(1000)
	for _, tt := range []struct {
		name      string
		sc        *runtimeapi.LinuxContainerSecurityContext
		imageUID  *int64
		imageUser string
		wantUID   *runtimeapi.Int64Value
		wantName  string
	}{
		{name: "group, image uid", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsGroup: i64(5)}, imageUID: &uid, wantUID: i64(1000)},
		{name: "group, image user name", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsGroup: i64(5)}, imageUser: "app", wantName: "app"},
		{name: "group, image without user", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsGroup: i64(5)}, wantUID: i64(0)},
		{name: "user and group kept", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUser: i64(7), RunAsGroup: i64(5)}, imageUID: &uid, wantUID: i64(7)},
		{name: "no group: nothing", sc: &runtimeapi.LinuxContainerSecurityContext{}, imageUID: &uid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			UserFromImage(tt.sc, tt.imageUID, tt.imageUser)
			if tt.sc.RunAsUser.GetValue() != tt.wantUID.GetValue() || (tt.sc.RunAsUser == nil) != (tt.wantUID == nil) || tt.sc.RunAsUsername != tt.wantName {
				t.Errorf("user %v name %q, want %v %q", tt.sc.RunAsUser, tt.sc.RunAsUsername, tt.wantUID, tt.wantName)
			}
		})
	}
}

func TestSecurityProfile(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name    string
		profile v1.SeccompProfile
		want    *runtimeapi.SecurityProfile
		wantErr string
	}{
		{"runtime default", v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
			&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, ""},
		{"unconfined", v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined},
			&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, ""},
		{"localhost", v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: str("profiles/audit.json")},
			&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/var/lib/kubelet/seccomp/profiles/audit.json"}, ""},
		{"localhost, absolute", v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: str("/etc/shadow")}, nil, "must be a path relative"},
		{"localhost, climbing out", v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: str("../../../etc/shadow")}, nil, "must be a path relative"},
		{"localhost, climbing out inside", v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: str("a/../../b")}, nil, "must be a path relative"},
		{"localhost, empty", v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: str("")}, nil, "must be set"},
		{"localhost, unset", v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}, nil, "must be set"},
		{"unknown type", v1.SeccompProfile{Type: "Strict"}, nil, "unknown seccomp profile type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := securityProfile(&tt.profile, "/var/lib/kubelet/seccomp")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.ProfileType != tt.want.ProfileType || got.LocalhostRef != tt.want.LocalhostRef {
				t.Fatalf("got %v %v, want %v", got, err, tt.want)
			}
		})
	}
}

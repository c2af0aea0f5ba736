package status

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestVolumeMountStatuses(t *testing.T) {
	enabled, ifPossible := v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyIfPossible
	spec := &v1.Container{Name: "app", VolumeMounts: []v1.VolumeMount{
		{Name: "data", MountPath: "/data"},
		{Name: "config", MountPath: "/config", ReadOnly: true},
		{Name: "rro", MountPath: "/rro", ReadOnly: true, RecursiveReadOnly: &enabled},
		{Name: "maybe", MountPath: "/maybe", ReadOnly: true, RecursiveReadOnly: &ifPossible},
	}}
	show := func(ms []v1.VolumeMountStatus) string {
		var out []string
		for _, m := range ms {
			s := fmt.Sprintf("%s:%s:%v", m.Name, m.MountPath, m.ReadOnly)
			if m.RecursiveReadOnly != nil {
				s += ":" + string(*m.RecursiveReadOnly)
			}
			out = append(out, s)
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		name string
		rro  bool
		old  *v1.ContainerStatus
		want string
	}{
		{"runtime with rro", true, nil,
			"data:/data:false config:/config:true:Disabled rro:/rro:true:Enabled maybe:/maybe:true:Enabled"},
		{"runtime without: Enabled cannot be, IfPossible is not", false, nil,
			"data:/data:false config:/config:true:Disabled rro:/rro:true:Disabled maybe:/maybe:true:Disabled"},
		{"reported once, kept", true, &v1.ContainerStatus{VolumeMounts: []v1.VolumeMountStatus{{Name: "data", MountPath: "/data"}}},
			"data:/data:false"},
	} {
		if got := show(volumeMounts(spec, tc.old, tc.rro)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if got := volumeMounts(&v1.Container{Name: "plain"}, nil, true); got != nil {
		t.Errorf("a container without mounts: %v", got)
	}
}

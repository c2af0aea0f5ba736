package podsync

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodeagent/kubelet/pkg/devicemanager"
	"github.com/nodeagent/kubelet/pkg/volume"
)

func TestAtLeastHeld(t *testing.T) {
	q := resource.MustParse
	for _, tc := range []struct {
		name        string
		alloc, held v1.ResourceList
		want        string
	}{
		{"plugin not registered yet: held devices count", v1.ResourceList{"cpu": q("2")}, v1.ResourceList{"example.com/dev": q("1")}, "1"},
		{"unhealthy devices below what is held", v1.ResourceList{"example.com/dev": q("0")}, v1.ResourceList{"example.com/dev": q("2")}, "2"},
		{"more allocatable than held stays", v1.ResourceList{"example.com/dev": q("4")}, v1.ResourceList{"example.com/dev": q("1")}, "4"},
		{"nothing held", nil, nil, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.alloc.DeepCopy()
			got := atLeastHeld(tc.alloc, tc.held)
			if g := got["example.com/dev"]; g.String() != tc.want {
				t.Errorf("allocatable %s, want %s", g.String(), tc.want)
			}
			if !equalLists(tc.alloc, before) {
				t.Errorf("the input was modified: %v", tc.alloc)
			}
		})
	}
}

func equalLists(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

func TestWithDevices(t *testing.T) {
	cfg := &runtimeapi.ContainerConfig{
		Envs:        []*runtimeapi.KeyValue{{Key: "VISIBLE", Value: "own"}},
		Annotations: map[string]string{"io.kubernetes.container.hash": "1"},
	}
	withDevices(cfg, &devicemanager.Options{
		Envs:        map[string]string{"VISIBLE": "plugin", "B": "2"},
		Mounts:      []*pluginapi.Mount{{ContainerPath: "/c", HostPath: "/h", ReadOnly: true}},
		Devices:     []*pluginapi.DeviceSpec{{ContainerPath: "/dev/x", HostPath: "/dev/null", Permissions: "r"}},
		Annotations: map[string]string{"io.kubernetes.container.hash": "plugin", "example.com/a": "v"},
		CDIDevices:  []string{"example.com/dev=1"},
	})
	// The plugin's environment comes first: the container's own value, last, wins in the runtime.
	var keys []string
	for _, e := range cfg.Envs {
		keys = append(keys, e.Key+"="+e.Value)
	}
	if want := []string{"B=2", "VISIBLE=plugin", "VISIBLE=own"}; len(keys) != 3 || keys[0] != want[0] || keys[1] != want[1] || keys[2] != want[2] {
		t.Errorf("envs %v, want %v", keys, want)
	}
	if len(cfg.Mounts) != 1 || !cfg.Mounts[0].Readonly || len(cfg.Devices) != 1 || cfg.Devices[0].Permissions != "r" ||
		len(cfg.CDIDevices) != 1 || cfg.CDIDevices[0].Name != "example.com/dev=1" {
		t.Errorf("config %+v", cfg)
	}
	if cfg.Annotations["io.kubernetes.container.hash"] != "1" || cfg.Annotations["example.com/a"] != "v" {
		t.Errorf("annotations %v: the kubelet's own must stay, the plugin's added", cfg.Annotations)
	}
	withDevices(cfg, nil) // a container without devices: unchanged
	if len(cfg.Envs) != 3 {
		t.Errorf("nil options changed the config")
	}
}

func TestBlockDevices(t *testing.T) {
	vols := map[string]volume.Mounted{
		"raw": {Path: "/root/pods/u/volumes/kubernetes.io~csi/pv/dev", Block: true},
		"ro":  {Path: "/root/pods/u/volumes/kubernetes.io~csi/pv2/dev", Block: true, ReadOnly: true},
		"fs":  {Path: "/root/pods/u/volumes/kubernetes.io~csi/pv3/mount"},
	}
	got, err := blockDevices(&v1.Container{Name: "c", VolumeDevices: []v1.VolumeDevice{{Name: "raw", DevicePath: "/dev/xvda"}, {Name: "ro", DevicePath: "/dev/xvdb"}}}, vols)
	if err != nil || len(got) != 2 || got[0].HostPath != vols["raw"].Path || got[0].ContainerPath != "/dev/xvda" || got[0].Permissions != "mrw" ||
		got[1].Permissions != "r" {
		t.Errorf("devices %v, %v", got, err)
	}
	for _, tc := range []struct {
		dev  v1.VolumeDevice
		want string
	}{
		{v1.VolumeDevice{Name: "fs", DevicePath: "/dev/x"}, `volume "fs" has volumeMode Filesystem, but is specified in volumeDevices`},
		{v1.VolumeDevice{Name: "nope", DevicePath: "/dev/x"}, `cannot find volume "nope"`},
	} {
		if _, err := blockDevices(&v1.Container{Name: "c", VolumeDevices: []v1.VolumeDevice{tc.dev}}, vols); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.dev.Name, err, tc.want)
		}
	}
}

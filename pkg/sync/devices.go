package podsync

import (
	"sort"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/devicemanager"
)

// withDevices adds to a container's config what device plugins answered for its devices, as upstream's
// kubelet adds a device's run options: their environment before the container's own (which wins on a
// repeated name, the runtime keeping the last), their mounts and device nodes after the volumes', their
// annotations under the kubelet's own, and their CDI device names.
func withDevices(cfg *runtimeapi.ContainerConfig, o *devicemanager.Options) {
	if o == nil {
		return
	}
	keys := make([]string, 0, len(o.Envs))
	for k := range o.Envs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	envs := make([]*runtimeapi.KeyValue, 0, len(keys)+len(cfg.Envs))
	for _, k := range keys {
		envs = append(envs, &runtimeapi.KeyValue{Key: k, Value: o.Envs[k]})
	}
	cfg.Envs = append(envs, cfg.Envs...)
	for _, m := range o.Mounts {
		cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, Readonly: m.ReadOnly})
	}
	for _, d := range o.Devices {
		cfg.Devices = append(cfg.Devices, &runtimeapi.Device{ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions})
	}
	if len(o.Annotations) > 0 && cfg.Annotations == nil {
		cfg.Annotations = map[string]string{}
	}
	for k, v := range o.Annotations {
		if _, own := cfg.Annotations[k]; !own {
			cfg.Annotations[k] = v
		}
	}
	for _, name := range o.CDIDevices {
		cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: name})
	}
}

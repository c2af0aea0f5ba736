// Package devicemanager is the kubelet's side of device plugins (deviceplugin/v1beta1), as upstream's
// cm/devicemanager: plugins register on <root-dir>/device-plugins/kubelet.sock, the manager dials each
// plugin's socket and follows its ListAndWatch stream, the node offers each resource's devices (capacity:
// all, allocatable: the healthy ones), admission allocates devices to the containers that ask for them
// (calling the plugin's Allocate then, as upstream does), and a container's config carries what the plugin
// answered (environment, mounts, device nodes, annotations, CDI device names).
//
// Allocations are kept in upstream's checkpoint (package checkpoint), so a restarted kubelet gives each
// running container the devices it had. A plugin that goes away leaves its resource with no allocatable
// device at once, and off the node after GracePeriod; running containers keep their devices.
package devicemanager

// Package dra is the kubelet's side of Dynamic Resource Allocation, reduced from upstream's
// pkg/kubelet/cm/dra.
//
// A pod names ResourceClaims (directly or through a template, whose claim the claim controller makes and
// records in the pod's status); the scheduler allocates devices of a DRA driver to each claim and reserves
// it for the pod. Before the pod's sandbox runs, Manager.Prepare checks each claim (allocated, reserved for
// the pod, owned by it if made from a template) and asks the claim's drivers, over their gRPC kubelet
// plugin service (dra v1, or v1beta1), to prepare it: NodePrepareResources answers the devices and their CDI
// device IDs, which the container runtime injects into the containers that name the claim
// (Manager.ContainerCDIDevices). When the pod's containers are gone, Manager.Unprepare drops the pod from
// its claims and calls NodeUnprepareResources for those no other pod on the node uses.
//
// The claims, the pods using them and the drivers' devices are checkpointed in <root dir>/dra_manager_state
// in upstream's format (package state), so a restarted kubelet still unprepares claims of pods deleted while
// it was down (Manager.Reconcile). A corrupt checkpoint is set aside, not fatal.
//
// Drivers register through the plugin watcher (type DRAPlugin): the Manager is its handler. When the last
// endpoint of a driver goes away and does not come back within 30 seconds, the driver's ResourceSlices of
// this node are deleted; all of the node's slices are deleted when the kubelet starts (Manager.Run), since
// no driver is registered then and the drivers publish theirs again.
//
// Device health (upstream's ResourceHealthStatus): a driver that registers with the v1alpha1.DRAResourceHealth
// service among its versions gets a NodeWatchResources stream per endpoint, opened again with a back-off when
// it breaks and closed when the endpoint deregisters; the manager keeps each device's last reported health
// (Unknown once older than the driver's timeout, 30 s by default, or when the driver is gone).
// Manager.ContainerHealth gives a container's allocatedResourcesStatus, and the function set with
// Manager.SetHealthChanged learns which pods' devices changed health, so that their status is computed again.
//
// Metrics, with upstream's names: dra_operations_duration_seconds, dra_grpc_operations_duration_seconds and
// dra_resource_claims_in_use.
package dra

// Package crimetrics is the CRI's pod metrics (ListMetricDescriptors, ListPodSandboxMetrics) as the built-in
// runtime serves them: cAdvisor's series names, help texts and label keys as containerd 2.x's CRI plugin
// gives them (pod, namespace, container, id, image, and interface, device, failure_type and scope where a
// series has them), built from a Sample of a container (its cgroup's statistics, its processes, its
// writable layer, its resources) or of a sandbox (its network interface).
//
// It is pure: Descriptors and ContainerMetrics/SandboxMetrics turn values into CRI messages; the runtime
// gathers the values. Every series a descriptor names is filled for every running container, except
// container_ulimits_soft, container_spec_cpu_quota, container_spec_memory_reservation_limit_bytes, the
// huge page and pressure series (listed by no descriptor, as containerd's plugin lists none of them either),
// and the block I/O series, present only for the devices the cgroup counted I/O on.
package crimetrics

// Package admission decides whether a pod that arrives on the node may run here.
//
// Admit is a pure function of the pod, the node (allocatable resources, labels, taints, max pods, and what
// the host and runtime can honour) and the pods already admitted. It checks what upstream's kubelet checks on
// admission, in upstream's order: sysctls against the safe set and --allowed-unsafe-sysctls, the pod's OS,
// supplementalGroupsPolicy Strict, pod count, cpu and memory requests against allocatable, node selector and
// required node affinity, NoExecute taints, then AppArmor profiles and user namespaces. A rejected pod gets
// phase Failed with the reason returned here (SysctlForbidden, PodOSNotSupported, OutOfpods, OutOfcpu,
// OutOfmemory, NodeAffinity, Taint, AppArmor, UserNamespacesNotSupported, ...), never a pod running without
// what it asked for.
//
// The package must do no I/O and hold no state; evicting other pods to make room is not its job.
package admission

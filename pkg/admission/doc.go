// Package admission decides whether a pod that arrives on the node may run here.
//
// Admit is a pure function of the pod, the node (allocatable resources, labels, taints, max pods) and the pods
// already admitted. It checks what upstream's kubelet checks on admission: pod count, cpu and memory requests
// against allocatable, node selector and required node affinity, and NoExecute taints. A rejected pod gets
// phase Failed with the reason returned here (OutOfpods, OutOfcpu, OutOfmemory, NodeAffinity, Taint).
//
// The package must do no I/O and hold no state; evicting other pods to make room is not its job.
package admission

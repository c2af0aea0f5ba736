// Package pleg is the pod lifecycle event generator: it learns what changed in the container runtime and
// tells the pod workers.
//
// Every second it relists the runtime's sandboxes and containers (ListPodSandbox, ListContainers), diffs the
// new view against the last one with a pure function (ComputeEvents) into ContainerStarted, ContainerDied,
// ContainerRemoved and ContainerChanged events per pod UID, inspects the pods that changed (PodSandboxStatus,
// ContainerStatus) into a Cache workers can wait on ("state newer than T"), and sends the events without ever
// blocking. A full relist reads and inspects without holding the lock that single-pod relists record under,
// so a pod worker's relist right after it changed its pod is never queued behind a slow full relist; the
// newer read of a pod wins. Runtime container events, when the runtime has them, trigger an immediate relist of one pod; the
// periodic relist stays as the safety net. Healthy fails after three minutes without a successful relist.
//
// The package only reads the runtime: it must never create, start, stop or remove anything.
package pleg

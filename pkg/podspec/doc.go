// Package podspec translates a pod's spec into the runtime's (CRI) configs: functions from values (the pod,
// the container, the node's facts, the resolved env and mounts) to a PodSandboxConfig, a ContainerConfig and
// their parts: hostname and domain, port mappings, namespace options, sysctls, DNS, security contexts
// (seccomp, AppArmor, users, the runAsNonRoot check), CRI labels and annotations, the /etc/hosts content,
// the termination message, a container's resources and its restart hash. It follows upstream's kuberuntime.
//
// It owns no engine and does no I/O: no runtime calls, no API client, no volume manager, no files, no
// clock. What it needs from them comes in as values, or as functions the caller gives (the lookups of
// configMaps and secrets an env refers to, the readers of a termination message). pkg/sync calls it and keeps
// the engine; the features that extend a container's config (user namespaces, image volumes, devices)
// extend it here. It must not import pkg/sync, pkg/runtime or client-go's clients.
package podspec

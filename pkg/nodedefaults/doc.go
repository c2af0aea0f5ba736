// Package nodedefaults names the node's defaults that several packages fall back on when their
// configuration leaves a value unset: where the kubelet keeps its state and the pods' logs, and how many
// pods the node takes. They are upstream's defaults; each package that defaults one of these values uses the
// name here rather than writing the value again.
//
// It is a leaf: constants only, importing nothing. Pod facts (resource sums, QoS, the sidecar test) live in
// podfacts; these are facts of the node's configuration, not of a pod.
package nodedefaults

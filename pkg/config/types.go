package config

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// Op is what happened to the pods of an update.
type Op int

// Operations, as upstream's kubelet names them.
const (
	// Add: pods the node has not seen before.
	Add Op = iota
	// Update: pods whose spec, labels, annotations or deletion fields changed.
	Update
	// Delete: pods whose graceful deletion was requested (deletionTimestamp set).
	Delete
	// Remove: pods gone from their source.
	Remove
	// Reconcile: pods whose status alone changed in the source.
	Reconcile
	// SourceSynced: the source named in Source has delivered its initial list, and every update of that
	// list is ahead of this one in the stream. It carries no pods and is sent once per source.
	SourceSynced
)

func (o Op) String() string {
	switch o {
	case Add:
		return "ADD"
	case Update:
		return "UPDATE"
	case Delete:
		return "DELETE"
	case Remove:
		return "REMOVE"
	case Reconcile:
		return "RECONCILE"
	case SourceSynced:
		return "SOURCE_SYNCED"
	}
	return "UNKNOWN"
}

// Source names: the values of the kubernetes.io/config.source annotation.
const (
	SourceAPI  = podfacts.SourceAPI
	SourceFile = podfacts.SourceFile
)

// PodUpdate is one change of the pods a source holds.
type PodUpdate struct {
	Op     Op
	Pods   []*v1.Pod
	Source string
}

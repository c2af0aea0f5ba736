package rest

import (
	"strings"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The columns kubectl prints for the storage.k8s.io kinds, as
// kube-apiserver's printers define them.
var (
	storageClassColumns = []column{colName, {"Provisioner", "string", 0}, {"ReclaimPolicy", "string", 0},
		{"VolumeBindingMode", "string", 0}, {"AllowVolumeExpansion", "string", 0}, colAge}
	csiDriverColumns = []column{colName, {"AttachRequired", "boolean", 0}, {"PodInfoOnMount", "boolean", 0},
		{"StorageCapacity", "boolean", 0}, {"TokenRequests", "string", 0}, {"RequiresRepublish", "boolean", 0},
		{"Modes", "string", 0}, colAge}
	csiNodeColumns          = []column{colName, {"Drivers", "integer", 0}, colAge}
	volumeAttachmentColumns = []column{colName, {"Attacher", "string", 0}, {"PV", "string", 0}, {"Node", "string", 0},
		{"Attached", "boolean", 0}, colAge}
	csiStorageCapacityColumns = []column{colName, {"StorageClassName", "string", 0}, {"Capacity", "string", 0}}
)

// isDefaultClassAnnotation marks the cluster's default StorageClass.
const isDefaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

func storageClassCells(o runtime.Object, name, age string, _ time.Time) []interface{} {
	sc := o.(*storagev1.StorageClass)
	if sc.Annotations[isDefaultClassAnnotation] == "true" {
		name += " (default)"
	}
	reclaim, binding := "Delete", string(storagev1.VolumeBindingImmediate)
	if sc.ReclaimPolicy != nil {
		reclaim = string(*sc.ReclaimPolicy)
	}
	if sc.VolumeBindingMode != nil {
		binding = string(*sc.VolumeBindingMode)
	}
	return []interface{}{name, sc.Provisioner, reclaim, binding, orFalse(sc.AllowVolumeExpansion), age}
}

func csiDriverCells(o runtime.Object, name, age string, _ time.Time) []interface{} {
	s := o.(*storagev1.CSIDriver).Spec
	attach := s.AttachRequired == nil || *s.AttachRequired
	tokens := "<unset>"
	if s.TokenRequests != nil {
		var audiences []string
		for _, t := range s.TokenRequests {
			audiences = append(audiences, t.Audience)
		}
		tokens = strings.Join(audiences, ",")
	}
	var modes []string
	for _, m := range s.VolumeLifecycleModes {
		modes = append(modes, string(m))
	}
	return []interface{}{name, attach, orFalse(s.PodInfoOnMount), orFalse(s.StorageCapacity), tokens,
		orFalse(s.RequiresRepublish), orNone(strings.Join(modes, ",")), age}
}

func csiNodeCells(o runtime.Object, name, age string, _ time.Time) []interface{} {
	return []interface{}{name, int64(len(o.(*storagev1.CSINode).Spec.Drivers)), age}
}

func volumeAttachmentCells(o runtime.Object, name, age string, _ time.Time) []interface{} {
	va := o.(*storagev1.VolumeAttachment)
	pv := ""
	if va.Spec.Source.PersistentVolumeName != nil {
		pv = *va.Spec.Source.PersistentVolumeName
	}
	return []interface{}{name, va.Spec.Attacher, pv, va.Spec.NodeName, va.Status.Attached, age}
}

func csiStorageCapacityCells(o runtime.Object, name, _ string, _ time.Time) []interface{} {
	c := o.(*storagev1.CSIStorageCapacity)
	capacity := "<unset>"
	if c.Capacity != nil {
		capacity = c.Capacity.String()
	}
	return []interface{}{name, c.StorageClassName, capacity}
}

func orFalse(b *bool) bool { return b != nil && *b }

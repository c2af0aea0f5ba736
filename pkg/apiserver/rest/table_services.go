package rest

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The columns kubectl prints for Services, PersistentVolumes and claims, as
// kube-apiserver's printers define them.
var (
	serviceColumns = []column{colName, {"Type", "string", 0}, {"Cluster-IP", "string", 0}, {"External-IP", "string", 0},
		{"Port(s)", "string", 0}, colAge, {"Selector", "string", 1}}
	volumeColumns = []column{colName, {"Capacity", "string", 0}, {"Access Modes", "string", 0},
		{"Reclaim Policy", "string", 0}, {"Status", "string", 0}, {"Claim", "string", 0}, {"StorageClass", "string", 0},
		{"VolumeAttributesClass", "string", 0}, {"Reason", "string", 0}, colAge, {"VolumeMode", "string", 1}}
	claimColumns = []column{colName, {"Status", "string", 0}, {"Volume", "string", 0}, {"Capacity", "string", 0},
		{"Access Modes", "string", 0}, {"StorageClass", "string", 0}, {"VolumeAttributesClass", "string", 0}, colAge,
		{"VolumeMode", "string", 1}}
)

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func orUnset(s *string) string {
	if s == nil || *s == "" {
		return "<unset>"
	}
	return *s
}

func serviceCells(o runtime.Object, name, age string, _ time.Time) []interface{} {
	svc := o.(*corev1.Service)
	s := svc.Spec
	external := "<none>"
	switch s.Type {
	case corev1.ServiceTypeExternalName:
		external = s.ExternalName
	case corev1.ServiceTypeLoadBalancer:
		var ips []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				ips = append(ips, in.IP)
			} else if in.Hostname != "" {
				ips = append(ips, in.Hostname)
			}
		}
		ips = append(ips, s.ExternalIPs...)
		external = "<pending>"
		if len(ips) > 0 {
			external = strings.Join(ips, ",")
		}
	default:
		if len(s.ExternalIPs) > 0 {
			external = strings.Join(s.ExternalIPs, ",")
		}
	}
	var ports []string
	for _, p := range s.Ports {
		if p.NodePort != 0 {
			ports = append(ports, fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol))
		} else {
			ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
		}
	}
	var sel []string
	for k, v := range s.Selector {
		sel = append(sel, k+"="+v)
	}
	sort.Strings(sel)
	clusterIP := s.ClusterIP
	if clusterIP == "" {
		clusterIP = "<none>"
	}
	return []interface{}{name, string(s.Type), clusterIP, external, orNone(strings.Join(ports, ",")), age,
		orNone(strings.Join(sel, ","))}
}

// accessModes prints access modes as kubectl abbreviates them.
func accessModes(modes []corev1.PersistentVolumeAccessMode) string {
	var out []string
	for _, want := range []struct {
		mode corev1.PersistentVolumeAccessMode
		abbr string
	}{{corev1.ReadWriteOnce, "RWO"}, {corev1.ReadOnlyMany, "ROX"}, {corev1.ReadWriteMany, "RWX"}, {corev1.ReadWriteOncePod, "RWOP"}} {
		for _, m := range modes {
			if m == want.mode {
				out = append(out, want.abbr)
				break
			}
		}
	}
	return strings.Join(out, ",")
}

func volumeModeOf(m *corev1.PersistentVolumeMode) string {
	if m == nil {
		return "<unset>"
	}
	return string(*m)
}

func volumeCells(o runtime.Object, name, age string, _ time.Time) []interface{} {
	pv := o.(*corev1.PersistentVolume)
	claim := ""
	if r := pv.Spec.ClaimRef; r != nil {
		claim = r.Namespace + "/" + r.Name
	}
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	phase := string(pv.Status.Phase)
	if pv.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	return []interface{}{name, size.String(), accessModes(pv.Spec.AccessModes), string(pv.Spec.PersistentVolumeReclaimPolicy),
		phase, claim, pv.Spec.StorageClassName, orUnset(pv.Spec.VolumeAttributesClassName), pv.Status.Reason, age,
		volumeModeOf(pv.Spec.VolumeMode)}
}

func claimCells(o runtime.Object, name, age string, _ time.Time) []interface{} {
	pvc := o.(*corev1.PersistentVolumeClaim)
	phase := string(pvc.Status.Phase)
	if pvc.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	capacity, modes := "", ""
	if pvc.Spec.VolumeName != "" {
		size := pvc.Status.Capacity[corev1.ResourceStorage]
		capacity, modes = size.String(), accessModes(pvc.Status.AccessModes)
	}
	class := ""
	if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	return []interface{}{name, phase, pvc.Spec.VolumeName, capacity, modes, class,
		orUnset(pvc.Spec.VolumeAttributesClassName), age, volumeModeOf(pvc.Spec.VolumeMode)}
}

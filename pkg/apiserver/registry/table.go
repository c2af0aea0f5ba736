package registry

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func resources() []*Resource {
	return []*Resource{
		{Version: "v1", Name: "namespaces", Singular: "namespace", Kind: "Namespace", ShortNames: []string{"ns"},
			Subresources: []string{"status", "finalize"}, Storage: "namespaces",
			New: func() runtime.Object { return &corev1.Namespace{} }, NewList: func() runtime.Object { return &corev1.NamespaceList{} },
			Strategy: namespaceStrategy{}},
		{Version: "v1", Name: "pods", Singular: "pod", Kind: "Pod", Namespaced: true, ShortNames: []string{"po"},
			Categories:   []string{"all"},
			Subresources: []string{"status", "resize", "ephemeralcontainers", "binding", "eviction", "log", "exec", "attach", "portforward"}, Storage: "pods",
			New: func() runtime.Object { return &corev1.Pod{} }, NewList: func() runtime.Object { return &corev1.PodList{} },
			Strategy: podStrategy{}},
		{Version: "v1", Name: "nodes", Singular: "node", Kind: "Node", ShortNames: []string{"no"},
			Subresources: []string{"status", "proxy"}, Storage: "nodes",
			New: func() runtime.Object { return &corev1.Node{} }, NewList: func() runtime.Object { return &corev1.NodeList{} },
			Strategy: nodeStrategy{}},
		{Version: "v1", Name: "events", Singular: "event", Kind: "Event", Namespaced: true, ShortNames: []string{"ev"},
			Storage: "events",
			New:     func() runtime.Object { return &corev1.Event{} }, NewList: func() runtime.Object { return &corev1.EventList{} },
			AllowCreateOnUpdate: true, Strategy: eventStrategy{}},
		{Version: "v1", Name: "configmaps", Singular: "configmap", Kind: "ConfigMap", Namespaced: true, ShortNames: []string{"cm"},
			Storage: "configmaps",
			New:     func() runtime.Object { return &corev1.ConfigMap{} }, NewList: func() runtime.Object { return &corev1.ConfigMapList{} },
			Strategy: configMapStrategy{}},
		{Version: "v1", Name: "secrets", Singular: "secret", Kind: "Secret", Namespaced: true,
			Storage: "secrets",
			New:     func() runtime.Object { return &corev1.Secret{} }, NewList: func() runtime.Object { return &corev1.SecretList{} },
			Strategy: secretStrategy{}},
		{Version: "v1", Name: "serviceaccounts", Singular: "serviceaccount", Kind: "ServiceAccount", Namespaced: true,
			ShortNames: []string{"sa"}, Subresources: []string{"token"}, Storage: "serviceaccounts",
			New:      func() runtime.Object { return &corev1.ServiceAccount{} },
			NewList:  func() runtime.Object { return &corev1.ServiceAccountList{} },
			Strategy: serviceAccountStrategy{}},
		{Version: "v1", Name: "services", Singular: "service", Kind: "Service", Namespaced: true, ShortNames: []string{"svc"},
			Categories: []string{"all"}, Subresources: []string{"status"}, Storage: "services",
			New:      func() runtime.Object { return &corev1.Service{} },
			NewList:  func() runtime.Object { return &corev1.ServiceList{} },
			Strategy: serviceStrategy{}, SerializeWrites: true},
		{Version: "v1", Name: "persistentvolumes", Singular: "persistentvolume", Kind: "PersistentVolume",
			ShortNames: []string{"pv"}, Subresources: []string{"status"}, Storage: "persistentvolumes",
			New:      func() runtime.Object { return &corev1.PersistentVolume{} },
			NewList:  func() runtime.Object { return &corev1.PersistentVolumeList{} },
			Strategy: persistentVolumeStrategy{}},
		{Version: "v1", Name: "persistentvolumeclaims", Singular: "persistentvolumeclaim", Kind: "PersistentVolumeClaim",
			Namespaced: true, ShortNames: []string{"pvc"}, Subresources: []string{"status"}, Storage: "persistentvolumeclaims",
			New:      func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
			NewList:  func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
			Strategy: persistentVolumeClaimStrategy{}},
		{Group: "coordination.k8s.io", Version: "v1", Name: "leases", Singular: "lease", Kind: "Lease", Namespaced: true,
			Storage:             "leases",
			New:                 func() runtime.Object { return &coordinationv1.Lease{} },
			NewList:             func() runtime.Object { return &coordinationv1.LeaseList{} },
			AllowCreateOnUpdate: true, Strategy: leaseStrategy{}},
		{Group: "events.k8s.io", Version: "v1", Name: "events", Singular: "event", Kind: "Event", Namespaced: true,
			ShortNames: []string{"ev"}, Storage: "events",
			New: func() runtime.Object { return &eventsv1.Event{} }, NewList: func() runtime.Object { return &eventsv1.EventList{} },
			StoredNew: func() runtime.Object { return &corev1.Event{} }, AllowCreateOnUpdate: true,
			Strategy: eventStrategy{}, Converter: eventsConverter{}},
	}
}

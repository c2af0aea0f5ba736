package eviction

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// violation is a pod that uses more local storage than it may, and what it exceeds.
type violation struct {
	pod     *v1.Pod
	message string
}

// localStorageViolations returns the pods that exceed a local storage limit, as upstream's
// localStorageEviction checks them, in order: an emptyDir above its sizeLimit, the pod's ephemeral storage
// (writable layers, logs, emptyDirs) above the sum of its containers' limits.ephemeral-storage, a container's
// writable layer and logs above its own limit. One violation per pod (the first found); pods without stats
// are skipped, never taken for empty.
func localStorageViolations(pods []*v1.Pod, ps podStats) []violation {
	var out []violation
	for _, pod := range pods {
		st := ps[pod.UID]
		if st == nil {
			continue
		}
		if msg, ok := emptyDirOverLimit(pod, st.VolumeStats); ok {
			out = append(out, violation{pod, msg})
			continue
		}
		if limit, ok := podEphemeralStorage(podLimits(pod)); ok && st.EphemeralStorage != nil && st.EphemeralStorage.UsedBytes != nil &&
			int64(*st.EphemeralStorage.UsedBytes) > limit {
			out = append(out, violation{pod, fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s.",
				resource.NewQuantity(limit, resource.BinarySI))})
			continue
		}
		for _, cs := range st.Containers {
			i := slices.IndexFunc(pod.Spec.Containers, func(c v1.Container) bool { return c.Name == cs.Name })
			if i < 0 || cs.Rootfs == nil || cs.Rootfs.UsedBytes == nil || cs.Logs == nil || cs.Logs.UsedBytes == nil {
				continue
			}
			q, ok := pod.Spec.Containers[i].Resources.Limits[v1.ResourceEphemeralStorage]
			if ok && int64(*cs.Rootfs.UsedBytes+*cs.Logs.UsedBytes) > podfacts.Value(q) {
				out = append(out, violation{pod, fmt.Sprintf("Container %s exceeded its local ephemeral storage limit %q.", cs.Name, q.String())})
				break
			}
		}
	}
	return out
}

// emptyDirOverLimit finds a disk-backed or memory-backed emptyDir whose usage is above its sizeLimit.
func emptyDirOverLimit(pod *v1.Pod, vols []statsapi.VolumeStats) (string, bool) {
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.IsZero() {
			continue
		}
		i := slices.IndexFunc(vols, func(s statsapi.VolumeStats) bool { return s.Name == v.Name })
		if i < 0 || vols[i].UsedBytes == nil {
			continue
		}
		if int64(*vols[i].UsedBytes) > podfacts.Value(*v.EmptyDir.SizeLimit) {
			return fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q.", v.Name, v.EmptyDir.SizeLimit.String()), true
		}
	}
	return "", false
}

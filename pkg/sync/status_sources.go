package podsync

import (
	"context"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/containerlogs"
	"github.com/nodeagent/kubelet/pkg/pleg"
	"github.com/nodeagent/kubelet/pkg/stats"
)

// Pods returns the pods the kubelet has been given and admitted, each with the status it last computed (the
// endpoint's /pods). They are copies.
func (k *Kubelet) Pods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range k.pods.all() {
		if k.pods.isRejected(p.UID) {
			continue
		}
		p = p.DeepCopy()
		if st, ok := k.status.PodStatus(p.UID); ok {
			p.Status = st
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out
}

// RunningPods returns what the runtime holds, as the last relist found it, by pod: its name, namespace and
// UID and its containers' names, images and IDs (the endpoint's /runningpods/, as upstream's).
func (k *Kubelet) RunningPods(context.Context) ([]*v1.Pod, error) {
	cache := k.pleg.Cache()
	var out []*v1.Pod
	for _, uid := range cache.UIDs() {
		st, err := cache.Get(uid)
		if err != nil || st == nil || len(st.Containers)+len(st.Sandboxes) == 0 {
			continue
		}
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: st.Name, Namespace: st.Namespace, UID: uid}}
		for _, c := range st.Containers {
			if c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue
			}
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c.GetMetadata().GetName(), Image: c.GetImage().GetImage()})
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{Name: c.GetMetadata().GetName(),
				Image: c.GetImage().GetImage(), ContainerID: k.cfg.RuntimeName + "://" + c.GetId(),
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Unix(0, c.GetStartedAt()))}}})
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out, nil
}

// StatsPods returns the running pods for the stats collector: each pod the kubelet runs that the runtime
// holds, with its running containers and what its volumes are.
func (k *Kubelet) StatsPods() []stats.Pod {
	cache := k.pleg.Cache()
	var out []stats.Pod
	for _, pod := range k.pods.all() {
		st, err := cache.Get(pod.UID)
		if err != nil || st == nil || len(st.Sandboxes) == 0 {
			continue
		}
		sp := stats.Pod{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, HostNetwork: pod.Spec.HostNetwork,
			StartTime: podStartTime(k, pod, st), Volumes: map[string]stats.VolumeInfo{}}
		images := map[string]string{}
		for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, c := range cs {
				images[c.Name] = c.Image
			}
		}
		for _, c := range st.Containers {
			if c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue
			}
			name := c.GetMetadata().GetName()
			sp.Containers = append(sp.Containers, stats.Container{Name: name, ID: c.GetId(), Image: images[name],
				StartTime: time.Unix(0, c.GetStartedAt())})
		}
		for _, v := range pod.Spec.Volumes {
			info := stats.VolumeInfo{Ephemeral: v.ConfigMap != nil || v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault}
			switch {
			case v.PersistentVolumeClaim != nil:
				info.Claim = v.PersistentVolumeClaim.ClaimName
			case v.Ephemeral != nil:
				info.Claim = pod.Name + "-" + v.Name // the ephemeral volume controller's claim
			}
			sp.Volumes[v.Name] = info
		}
		out = append(out, sp)
	}
	return out
}

// podStartTime is the pod's start time in its status, else its oldest sandbox's creation.
func podStartTime(k *Kubelet, pod *v1.Pod, st *pleg.PodState) time.Time {
	if s, ok := k.status.PodStatus(pod.UID); ok && s.StartTime != nil {
		return s.StartTime.Time
	}
	var t time.Time
	for _, sb := range st.Sandboxes {
		if c := time.Unix(0, sb.GetCreatedAt()); t.IsZero() || c.Before(t) {
			t = c
		}
	}
	return t
}

// LogContainers returns the running containers with their current log file, as the last relist found them
// (for log rotation).
func (k *Kubelet) LogContainers() []containerlogs.Container {
	cache := k.pleg.Cache()
	var out []containerlogs.Container
	for _, uid := range cache.UIDs() {
		st, err := cache.Get(uid)
		if err != nil || st == nil {
			continue
		}
		for _, c := range st.Containers {
			if c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING || c.GetLogPath() == "" {
				continue
			}
			out = append(out, containerlogs.Container{ID: c.GetId(), Name: c.GetMetadata().GetName(), Pod: st.Name,
				Namespace: st.Namespace, PodUID: string(uid), LogPath: c.GetLogPath()})
		}
	}
	return out
}

// ActivePods returns the pods the kubelet runs: admitted and not yet terminating.
func (k *Kubelet) ActivePods() []*v1.Pod {
	known := k.workers.known()
	var out []*v1.Pod
	for _, p := range k.pods.all() {
		if info, ok := known[p.UID]; ok && info.state == stateSyncing && !k.pods.isRejected(p.UID) {
			out = append(out, p)
		}
	}
	return out
}

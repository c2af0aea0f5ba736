package cgroups

import (
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// rl parses "cpu=100m,memory=1Gi" into a ResourceList; "" is nil.
func rl(s string) v1.ResourceList {
	if s == "" {
		return nil
	}
	out := v1.ResourceList{}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out[v1.ResourceName(k)] = resource.MustParse(v)
	}
	return out
}

// ctr builds a container with requests and limits in rl's format.
func ctr(name, requests, limits string) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: rl(requests), Limits: rl(limits)}}
}

// sidecar builds a restartable init container.
func sidecar(name, requests, limits string) v1.Container {
	c := ctr(name, requests, limits)
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

type podOpt func(*v1.Pod)

func withInit(cs ...v1.Container) podOpt {
	return func(p *v1.Pod) { p.Spec.InitContainers = append(p.Spec.InitContainers, cs...) }
}

func withPodResources(requests, limits string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Resources = &v1.ResourceRequirements{Requests: rl(requests), Limits: rl(limits)}
	}
}

func withOverhead(s string) podOpt {
	return func(p *v1.Pod) { p.Spec.Overhead = rl(s) }
}

// mkPod builds a pod with the given app containers.
func mkPod(uid string, containers []v1.Container, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{}
	p.Name, p.Namespace, p.UID = "p-"+uid, "default", types.UID(uid)
	p.Spec.Containers = containers
	for _, o := range opts {
		o(p)
	}
	return p
}

func guaranteedPod(uid string) *v1.Pod {
	return mkPod(uid, []v1.Container{ctr("app", "cpu=500m,memory=128Mi", "cpu=500m,memory=128Mi")})
}

func burstablePod(uid string) *v1.Pod {
	return mkPod(uid, []v1.Container{ctr("app", "cpu=250m,memory=64Mi", "cpu=1,memory=256Mi")})
}

func bestEffortPod(uid string) *v1.Pod {
	return mkPod(uid, []v1.Container{ctr("app", "", "")})
}

func ptr[T any](v T) *T { return &v }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

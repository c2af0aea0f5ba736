package registry

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// Pod-level resources (spec.resources, upstream's PodLevelResources, beta and on in 1.35): defaulted and
// validated as kube-apiserver 1.35 does.

// defaultPodLevelRequests fills pod-level requests a pod with pod-level limits leaves out, after the
// containers' defaults, as upstream's defaultPodRequests: a resource the containers request defaults to their
// aggregate request (CPU and memory), else to the pod-level limit.
func defaultPodLevelRequests(pod *corev1.Pod) {
	r := pod.Spec.Resources
	if r == nil || len(r.Limits) == 0 {
		return
	}
	reqs := r.Requests
	if reqs == nil {
		reqs = corev1.ResourceList{}
	}
	for name, q := range podfacts.AggregateContainerRequests(pod) {
		if _, ok := reqs[name]; !ok && (name == corev1.ResourceCPU || name == corev1.ResourceMemory) {
			reqs[name] = q.DeepCopy()
		}
	}
	for name, q := range r.Limits {
		if _, ok := reqs[name]; !ok && podfacts.SupportedPodLevelResource(name) {
			reqs[name] = q.DeepCopy()
		}
	}
	if len(reqs) > 0 {
		r.Requests = reqs
	}
}

// validatePodLevelResources checks spec.resources as kube-apiserver 1.35 does: not on a Windows pod, no
// claims, only CPU, memory and huge pages, non-negative amounts, requests within limits (huge pages equal),
// requests covering the containers' aggregate requests, limits covering each container's limits (huge pages:
// the aggregate).
func validatePodLevelResources(s *corev1.PodSpec, path *field.Path) field.ErrorList {
	r := s.Resources
	if r == nil {
		return nil
	}
	p := path.Child("resources")
	if s.OS != nil && s.OS.Name == corev1.Windows {
		return field.ErrorList{field.Forbidden(p, "may not be set for a windows pod")}
	}
	var errs field.ErrorList
	if r.Claims != nil {
		errs = append(errs, field.Forbidden(p.Child("claims"), "claims may not be set for Resources at pod-level"))
	}
	supported := []string{"cpu", "hugepages-", "memory"}
	hugePages, cpuOrMemory := false, false
	check := func(list corev1.ResourceList, lp *field.Path) {
		for _, name := range sortedResourceNames(list) {
			q := list[name]
			np := lp.Key(string(name))
			if !podfacts.SupportedPodLevelResource(name) {
				errs = append(errs, field.NotSupported(np, name, supported))
				continue
			}
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(np, q.String(), "must be greater than or equal to 0"))
			}
			if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
				hugePages = true
			} else {
				cpuOrMemory = true
			}
		}
	}
	check(r.Limits, p.Child("limits"))
	check(r.Requests, p.Child("requests"))
	for _, name := range sortedResourceNames(r.Requests) {
		req := r.Requests[name]
		lim, ok := r.Limits[name]
		overcommit := !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
		switch {
		case ok && !overcommit && req.Cmp(lim) != 0:
			errs = append(errs, field.Invalid(p.Child("requests"), req.String(), fmt.Sprintf("must be equal to %s limit of %s", name, lim.String())))
		case ok && req.Cmp(lim) > 0:
			errs = append(errs, field.Invalid(p.Child("requests"), req.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		case !ok && !overcommit:
			errs = append(errs, field.Required(p.Child("limits"), "Limit must be set for non overcommitable resources"))
		}
	}
	if hugePages && !cpuOrMemory {
		errs = append(errs, field.Forbidden(p, "HugePages require cpu or memory"))
	}
	pod := &corev1.Pod{Spec: *s}
	aggregate := podfacts.AggregateContainerRequests(pod)
	for _, name := range sortedResourceNames(aggregate) {
		podReq, ok := r.Requests[name]
		if ctrs := aggregate[name]; ok && ctrs.Cmp(podReq) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), podReq.String(),
				fmt.Sprintf("must be greater than or equal to aggregate container requests of %s", ctrs.String())))
		}
	}
	aggregateLimits := podfacts.AggregateContainerLimits(pod)
	for _, name := range sortedResourceNames(aggregateLimits) {
		podLim, ok := r.Limits[name]
		if ctrs := aggregateLimits[name]; ok && strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) && ctrs.Cmp(podLim) > 0 {
			errs = append(errs, field.Invalid(p.Child("limits").Key(string(name)), podLim.String(),
				fmt.Sprintf("must be greater than or equal to aggregate container limits of %s", ctrs.String())))
		}
	}
	for i, c := range s.Containers {
		for _, name := range sortedResourceNames(c.Resources.Limits) {
			podLim, ok := r.Limits[name]
			if ctrLim := c.Resources.Limits[name]; ok && ctrLim.Cmp(podLim) > 0 {
				errs = append(errs, field.Invalid(p.Child("containers").Index(i).Key(string(name)).Child("limits"), ctrLim.String(),
					fmt.Sprintf("must be less than or equal to pod limits of %s", podLim.String())))
			}
		}
	}
	return errs
}

// sortedResourceNames lists a resource list's names in order, so that errors come in a stable order.
func sortedResourceNames(list corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(list))
	for name := range list {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

package cgroups

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Bounds of the values this package turns into cgroup settings. They sit
// far above any real machine and keep every product in int64.
var (
	maxCPU   = resource.MustParse("1000000")                   // cores
	maxBytes = *resource.NewQuantity(1<<62, resource.BinarySI) // 4 EiB
)

// ValidatePodResources checks what the cgroup math needs from a pod's
// resources, for pods that did not pass API validation (static manifests):
// no negative or out-of-range CPU, memory or huge page quantity, no request
// above its limit, huge page names with a valid size and amounts that are
// whole pages, huge page requests equal to their limits. The error names the
// container and the resource; it wraps ErrInvalidResources.
func ValidatePodResources(pod *v1.Pod) error {
	var errs []string
	check := func(owner string, r *v1.ResourceRequirements) {
		for _, list := range []v1.ResourceList{r.Requests, r.Limits} {
			for name, q := range list {
				if err := validateQuantity(name, q); err != nil {
					errs = append(errs, owner+": "+err.Error())
				}
			}
		}
		for name, req := range r.Requests {
			lim, ok := r.Limits[name]
			if !ok || !tracked(name) {
				continue
			}
			huge := strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
			switch {
			case huge && req.Cmp(lim) != 0:
				errs = append(errs, fmt.Sprintf("%s: %s request %s must equal its limit %s", owner, name, req.String(), lim.String()))
			case !huge && !lim.IsZero() && req.Cmp(lim) > 0:
				errs = append(errs, fmt.Sprintf("%s: %s request %s exceeds its limit %s", owner, name, req.String(), lim.String()))
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		check(fmt.Sprintf("init container %q", c.Name), &c.Resources)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		check(fmt.Sprintf("container %q", c.Name), &c.Resources)
	}
	if pod.Spec.Resources != nil {
		check("pod resources", pod.Spec.Resources)
	}
	for name, q := range pod.Spec.Overhead {
		if err := validateQuantity(name, q); err != nil {
			errs = append(errs, "pod overhead: "+err.Error())
		}
	}
	if len(errs) == 0 {
		return nil
	}
	slices.Sort(errs) // map order is random
	return fmt.Errorf("%w: %s", ErrInvalidResources, strings.Join(errs, "; "))
}

// tracked reports whether the cgroup math uses the resource.
func tracked(name v1.ResourceName) bool {
	return name == v1.ResourceCPU || name == v1.ResourceMemory ||
		strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

func validateQuantity(name v1.ResourceName, q resource.Quantity) error {
	if !tracked(name) {
		return nil
	}
	if q.Sign() < 0 {
		return fmt.Errorf("%s %s must not be negative", name, q.String())
	}
	limit := maxBytes
	if name == v1.ResourceCPU {
		limit = maxCPU
	}
	if q.Cmp(limit) > 0 {
		return fmt.Errorf("%s %s exceeds the largest supported value %s", name, q.String(), limit.String())
	}
	size, huge, err := hugePageSize(name)
	if err != nil {
		return err
	}
	if huge && q.Value()%size != 0 {
		return fmt.Errorf("%s %s is not a whole number of pages", name, q.String())
	}
	return nil
}

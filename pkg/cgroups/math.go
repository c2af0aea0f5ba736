package cgroups

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// hugePagesUnbounded is the huge page limit of the QoS cgroups.
const hugePagesUnbounded = int64(1) << 62

// hugePageSizeUnits are the units of the kernel's page size names.
var hugePageSizeUnits = []string{"B", "KB", "MB", "GB", "TB", "PB"}

// HugePageSizeName converts a page size in bytes to the name the hugetlb
// controller uses in its file names: 2097152 gives "2MB", 1073741824 "1GB".
func HugePageSizeName(size int64) (string, error) {
	if size <= 0 {
		return "", fmt.Errorf("huge page size %d must be positive", size)
	}
	idx := 0
	for size%1024 == 0 && idx < len(hugePageSizeUnits)-1 {
		size /= 1024
		idx++
	}
	if size > 1024 {
		return "", fmt.Errorf("huge page size %d%s is not a whole number of units", size, hugePageSizeUnits[idx])
	}
	return fmt.Sprintf("%d%s", size, hugePageSizeUnits[idx]), nil
}

// hugePageSize returns the page size in bytes of a "hugepages-<size>"
// resource name, and whether the name is one.
func hugePageSize(name v1.ResourceName) (int64, bool, error) {
	s, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
	if !ok {
		return 0, false, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return 0, true, fmt.Errorf("resource %q: invalid huge page size", name)
	}
	return q.Value(), true, nil
}

// HugePageLimits maps page size (bytes) to a limit (bytes) for every
// huge page resource in the list, summing duplicates of the same size.
func HugePageLimits(list v1.ResourceList) map[int64]int64 {
	out := map[int64]int64{}
	for name, q := range list {
		size, ok, err := hugePageSize(name)
		if !ok || err != nil {
			continue
		}
		out[size] += q.Value()
	}
	return out
}

// parseHugePageSizeName is the inverse of HugePageSizeName: "2MB" gives
// 2097152.
func parseHugePageSizeName(name string) (int64, error) {
	for i := len(hugePageSizeUnits) - 1; i >= 0; i-- {
		num, ok := strings.CutSuffix(name, hugePageSizeUnits[i])
		if !ok || num == "" || strings.ContainsAny(num, "BKMGTP") {
			continue
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n <= 0 {
			break
		}
		return n << (10 * i), nil
	}
	return 0, fmt.Errorf("invalid huge page size name %q", name)
}

package cgroups

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Upstream's numbers (pkg/kubelet/cm/helpers_linux.go).
const (
	// MinShares and MaxShares are the kernel's bounds for cpu.shares.
	MinShares = 2
	MaxShares = 262144
	// SharesPerCPU is cpu.shares for one CPU.
	SharesPerCPU = 1024
	// MilliCPUToCPU is the number of milli-CPUs in a CPU.
	MilliCPUToCPU = 1000
	// QuotaPeriod is the CFS period in microseconds: 100 ms.
	QuotaPeriod = 100000
	// MinQuotaPeriod is the smallest CFS quota in microseconds: 1 ms.
	MinQuotaPeriod = 1000
	// MaxWeight is the largest cgroup v2 cpu.weight.
	MaxWeight = 10000
	// hugePagesUnbounded is the huge page limit of the QoS cgroups.
	hugePagesUnbounded = int64(1) << 62
)

// MilliCPUToShares converts a CPU request to cpu.shares:
// milliCPU*1024/1000 clamped to [2, 262144]; zero gives 2.
func MilliCPUToShares(milliCPU int64) uint64 {
	if milliCPU <= 0 {
		return MinShares
	}
	if milliCPU > MaxShares*MilliCPUToCPU/SharesPerCPU {
		return MaxShares // also keeps the product below from overflowing
	}
	shares := milliCPU * SharesPerCPU / MilliCPUToCPU
	if shares < MinShares {
		return MinShares
	}
	return uint64(shares)
}

// MilliCPUToQuota converts a CPU limit to a CFS quota in microseconds for
// the given period: milliCPU*period/1000, at least 1 ms; zero means no
// quota and gives 0.
func MilliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU <= 0 || period <= 0 {
		return 0
	}
	if milliCPU > (1<<62)/period {
		milliCPU = (1 << 62) / period // out of any real range; never overflow
	}
	quota := milliCPU * period / MilliCPUToCPU
	if quota < MinQuotaPeriod {
		return MinQuotaPeriod
	}
	return quota
}

// SharesToWeight converts cpu.shares to cgroup v2 cpu.weight as upstream's
// kubelet does: 1 + ((shares-2)*9999)/262142, so 2 gives 1 and 262144 gives
// 10000. Zero stays zero (unset).
func SharesToWeight(shares uint64) uint64 {
	switch {
	case shares == 0:
		return 0
	case shares <= MinShares:
		return 1
	case shares >= MaxShares:
		return MaxWeight
	}
	return 1 + ((shares-2)*9999)/262142
}

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

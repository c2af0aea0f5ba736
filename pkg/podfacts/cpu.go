package podfacts

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

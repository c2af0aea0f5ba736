package podfacts

import "testing"

// Expected values follow upstream's helpers_linux_test.go.
func TestMilliCPUToShares(t *testing.T) {
	tests := []struct {
		milli int64
		want  uint64
	}{
		{0, 2}, {-5, 2}, {1, 2}, {1000 * 2 / 1024, 2}, // below 2 shares
		{2, 2}, {3, 3}, {100, 102}, {250, 256}, {500, 512}, {1000, 1024}, {1500, 1536}, {2000, 2048},
		{255999, 262142}, {256000, 262144}, {256001, 262144}, {100000000, 262144}, {1 << 62, 262144},
	}
	for _, tt := range tests {
		if got := MilliCPUToShares(tt.milli); got != tt.want {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", tt.milli, got, tt.want)
		}
	}
}

func TestMilliCPUToQuota(t *testing.T) {
	tests := []struct {
		milli, period, want int64
	}{
		{0, 100000, 0},
		{-1, 100000, 0},
		{5, 100000, 1000},    // 500 us clamped to 1 ms
		{9, 100000, 1000},    // 900 us clamped
		{10, 100000, 1000},   // upstream's MinMilliCPULimit
		{11, 100000, 1100},   // 1.1 ms
		{200, 100000, 20000}, // 20 ms
		{500, 100000, 50000},
		{1000, 100000, 100000},
		{1500, 100000, 150000},
		{2000, 50000, 100000}, // other period
		{100, 5000, 1000},     // 0.5 ms clamped
		{1000, 0, 0},          // no period
	}
	for _, tt := range tests {
		if got := MilliCPUToQuota(tt.milli, tt.period); got != tt.want {
			t.Errorf("MilliCPUToQuota(%d, %d) = %d, want %d", tt.milli, tt.period, got, tt.want)
		}
	}
	if got := MilliCPUToQuota(1<<62, QuotaPeriod); got <= 0 {
		t.Errorf("MilliCPUToQuota(huge) = %d, want positive (no overflow)", got)
	}
}

// Expected values: 1 + ((shares-2)*9999)/262142, upstream's conversion.
func TestSharesToWeight(t *testing.T) {
	tests := []struct {
		shares, want uint64
	}{
		{0, 0}, {1, 1}, {2, 1}, {3, 1}, {28, 1}, {29, 2},
		{102, 4}, {256, 10}, {512, 20}, {1024, 39}, {2048, 79}, {262142, 9999}, {262144, 10000}, {1 << 20, 10000},
	}
	for _, tt := range tests {
		if got := SharesToWeight(tt.shares); got != tt.want {
			t.Errorf("SharesToWeight(%d) = %d, want %d", tt.shares, got, tt.want)
		}
	}
}

package limits

import (
	"runtime"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// FuzzQuantity checks CheckQuantity's promise: a quantity it lets through parses, prints, compares and adds
// quickly and in little memory.
func FuzzQuantity(f *testing.F) {
	for _, s := range []string{"1", "100m", "1.5Gi", "1e100", "-1e-100", "1E", "9223372036854775807Ei", "0.000000001n", "1e-1000000000"} {
		f.Add(s)
	}
	one := resource.MustParse("1")
	f.Fuzz(func(t *testing.T, s string) {
		if CheckQuantity(s) != nil {
			return
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return
		}
		_ = q.String()
		_ = q.Cmp(one)
		q.Add(one)
		_ = q.MilliValue()
		_ = q.AsDec().String()
		runtime.ReadMemStats(&after)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("%q took %v", s, d)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
			t.Fatalf("%q allocated %d bytes", s, got)
		}
	})
}

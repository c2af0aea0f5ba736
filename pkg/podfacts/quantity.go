package podfacts

import (
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
)

// MaxMilli bounds quantities: beyond about 9.2e15 units (far above any real node) they read as this.
const MaxMilli = math.MaxInt64 / 2

// MilliValue returns q in thousandths, saturated at ±MaxMilli. Unlike Quantity.MilliValue it stays fast on
// absurd exponents ("1e99999999"), which would otherwise take minutes of big-number arithmetic.
func MilliValue(q resource.Quantity) int64 {
	f := q.AsApproximateFloat64()
	switch {
	case math.IsNaN(f):
		return 0
	case f >= MaxMilli/1000:
		return MaxMilli
	case f <= -MaxMilli/1000:
		return -MaxMilli
	}
	return q.MilliValue()
}

// Value returns q rounded up to a whole unit, saturated like MilliValue.
func Value(q resource.Quantity) int64 {
	m := MilliValue(q)
	if m >= MaxMilli || m <= -MaxMilli {
		return m / 1000
	}
	return q.Value()
}

// AddSat adds two values saturating at ±MaxMilli.
func AddSat(a, b int64) int64 {
	if s := a + b; s <= MaxMilli && s >= -MaxMilli {
		return s
	}
	if b > 0 {
		return MaxMilli
	}
	return -MaxMilli
}

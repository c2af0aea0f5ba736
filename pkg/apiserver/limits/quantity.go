package limits

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxQuantityLength is the longest text of a resource quantity accepted:
// upstream's own quantities are at most a few dozen characters, and parsing
// or printing one of thousands of digits takes seconds.
const MaxQuantityLength = 64

// MaxQuantityExponent bounds a quantity's decimal exponent (the n of 1en):
// rounding or comparing 1e-1000000 or 1e1000000000 does not end in
// reasonable time.
const MaxQuantityExponent = 100

// ErrQuantity is wrapped by every refusal of a quantity.
var ErrQuantity = errors.New("quantity out of range")

// CheckQuantity returns an error wrapping ErrQuantity when s, the text of a
// resource quantity, is longer than MaxQuantityLength or has a decimal
// exponent beyond ±MaxQuantityExponent. Any other text, well-formed or not,
// is left to the quantity parser, which handles it quickly.
func CheckQuantity(s string) error {
	s = strings.TrimSpace(s)
	if len(s) > MaxQuantityLength {
		return fmt.Errorf("%w: %q is longer than %d characters", ErrQuantity, abbreviate(s), MaxQuantityLength)
	}
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	for i < len(s) && (isDigit(s[i]) || s[i] == '.') {
		i++
	}
	if i == len(s) || (s[i] != 'e' && s[i] != 'E') || i+1 == len(s) {
		return nil // no exponent (a suffix, "E" alone being exa, or garbage the parser refuses)
	}
	j := i + 1
	if s[j] == '+' || s[j] == '-' {
		j++
	}
	exp := 0
	for k := j; k < len(s); k++ {
		if !isDigit(s[k]) {
			return nil // not an exponent: the parser refuses it
		}
		if exp = exp*10 + int(s[k]-'0'); exp > MaxQuantityExponent {
			return fmt.Errorf("%w: %q has an exponent beyond ±%d", ErrQuantity, s, MaxQuantityExponent)
		}
	}
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func abbreviate(s string) string {
	if len(s) > 24 {
		return s[:20] + "..."
	}
	return s
}

// MayHoldBadQuantity is a fast first look at a JSON or protobuf body: false
// means no quantity in it can fail CheckQuantity (no exponent after a digit,
// no run of MaxQuantityLength/2 or more quantity characters, no JSON \u
// escape that could hide either), so the body need not be walked.
func MayHoldBadQuantity(data []byte) bool {
	run := 0
	for i, c := range data {
		switch {
		case isDigit(c) || c == '.' || c == '+' || c == '-':
			run++
			if run >= MaxQuantityLength/2 {
				return true
			}
		case (c == 'e' || c == 'E') && run > 0 && i+1 < len(data) &&
			(isDigit(data[i+1]) || data[i+1] == '+' || data[i+1] == '-'):
			return true
		case c == '\\' && i+1 < len(data) && data[i+1] == 'u':
			return true
		default:
			run = 0
		}
	}
	return false
}

var quantityType = reflect.TypeOf(resource.Quantity{})

var (
	fieldCache    sync.Map // reflect.Type -> map[string]reflect.Type
	quantityCache sync.Map // reflect.Type -> bool
)

// HasQuantity reports whether values of Go type t can hold a resource
// quantity anywhere (a Pod can, a ConfigMap cannot).
func HasQuantity(t reflect.Type) bool {
	t = deref(t)
	if v, ok := quantityCache.Load(t); ok {
		return v.(bool)
	}
	has := hasQuantity(t, map[reflect.Type]bool{})
	quantityCache.Store(t, has)
	return has
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func hasQuantity(t reflect.Type, seen map[reflect.Type]bool) bool {
	t = deref(t)
	if t == quantityType {
		return true
	}
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return hasQuantity(t.Elem(), seen)
	case reflect.Struct:
		for _, ft := range jsonFields(t) {
			if hasQuantity(ft, seen) {
				return true
			}
		}
	}
	return false
}

// jsonFields returns the JSON fields of struct t by name, inlined structs
// included, as the apimachinery JSON decoder sees them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if v, ok := fieldCache.Load(t); ok {
		return v.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			if ft := deref(f.Type); ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, dup := out[k]; !dup {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	fieldCache.Store(t, out)
	return out
}

// CheckJSON returns an error wrapping ErrQuantity, naming the field, for the
// first quantity in v that fails CheckQuantity. v is the generic JSON form
// (what encoding/json decodes into an any, with UseNumber) of a value of Go
// type t; parts of v that do not fit t are ignored, as the typed decoder
// refuses them itself.
func CheckJSON(t reflect.Type, v any, path *field.Path) error {
	t = deref(t)
	if t == quantityType {
		var text string
		switch q := v.(type) {
		case string:
			text = q
		case json.Number: // the quantity decoder takes JSON numbers too
			text = string(q)
		default:
			return nil
		}
		if err := CheckQuantity(text); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		fields := jsonFields(t)
		for k, sub := range m {
			if ft, ok := fields[k]; ok {
				if err := CheckJSON(ft, sub, path.Child(k)); err != nil {
					return err
				}
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for k, sub := range m {
			if err := CheckJSON(t.Elem(), sub, path.Key(k)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte is a base64 string
		}
		l, ok := v.([]any)
		if !ok {
			return nil
		}
		for i, sub := range l {
			if err := CheckJSON(t.Elem(), sub, path.Index(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

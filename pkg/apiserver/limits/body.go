package limits

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// protoMagic starts every Kubernetes protobuf body.
var protoMagic = []byte("k8s\x00")

// maxProtoDepth bounds how deep CheckProto looks into nested messages; the
// quantities of the served kinds sit at depth 10 at most, and the typed
// decoder reaches them only where the schema puts them.
const maxProtoDepth = 32

// CheckJSONBody checks the quantities of a JSON body holding a value of Go
// type t (see CheckJSON). A body that is not JSON is left to the decoder.
func CheckJSONBody(t reflect.Type, data []byte) error {
	if !HasQuantity(t) || !MayHoldBadQuantity(data) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	return CheckJSON(t, v, nil)
}

// CheckProto checks a Kubernetes protobuf body holding a value of Go type t:
// without its schema at hand it refuses any string field that reads as a
// quantity (digits with a sign, point, suffix or exponent only) and fails
// CheckQuantity. Bodies of kinds without quantities are not looked at.
func CheckProto(t reflect.Type, data []byte) error {
	if !HasQuantity(t) || !MayHoldBadQuantity(data) {
		return nil
	}
	return scanProto(bytes.TrimPrefix(data, protoMagic), 0)
}

// scanProto checks every length-delimited field of a protobuf message, and
// of the messages nested in them down to maxProtoDepth. Bytes that are not
// a message end the scan of that level without error.
func scanProto(b []byte, depth int) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if quantityLike(v) {
			if err := CheckQuantity(string(v)); err != nil {
				return fmt.Errorf("%s: %w", field.NewPath("protobuf"), err)
			}
		}
		if depth < maxProtoDepth {
			if err := scanProto(v, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// quantityLike reports whether b reads as the text of a quantity: a sign,
// digit or point first, then only digits, points, signs and the letters of
// suffixes and exponents.
func quantityLike(b []byte) bool {
	if len(b) == 0 || !(isDigit(b[0]) || b[0] == '+' || b[0] == '-' || b[0] == '.') {
		return false
	}
	for _, c := range b {
		if !isDigit(c) && bytes.IndexByte([]byte(".+-eEkKMGTPnumi"), c) < 0 {
			return false
		}
	}
	return true
}

package limits

import (
	"sync/atomic"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// MaxJSONPatchOperations is kube-apiserver's limit on the operations of one
// JSON patch.
const MaxJSONPatchOperations = 10000

// JSONPatchMaxCopyBytes is kube-apiserver's default bound on how much a JSON
// patch's copy operations may add to a document (the size of a request body).
const JSONPatchMaxCopyBytes = 3 << 20

// BoundJSONPatchCopies sets json-patch's process-wide limit on the bytes a
// patch's copy operations may add (AccumulatedCopySizeLimit) to limit, unless
// another user of the library in this process set a lower one, as
// kube-apiserver does. Safe for concurrent use.
func BoundJSONPatchCopies(limit int64) {
	for limit > 0 {
		cur := atomic.LoadInt64(&jsonpatch.AccumulatedCopySizeLimit)
		if cur > 0 && cur <= limit {
			return
		}
		if atomic.CompareAndSwapInt64(&jsonpatch.AccumulatedCopySizeLimit, cur, limit) {
			return
		}
	}
}

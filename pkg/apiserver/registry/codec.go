package registry

import (
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeagent/kubelet/pkg/apiserver/limits"
	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// Codec stores objects as JSON with their apiVersion and kind set. It
// implements storage.Codec and is safe for concurrent use.
type Codec struct{ reg *Registry }

var _ storage.Codec = Codec{}

// Codec returns the storage codec for the registry's stored forms.
func (g *Registry) Codec() Codec { return Codec{reg: g} }

func (c Codec) resource(key string) (*Resource, error) {
	r, ok := c.reg.ForStorage(storage.ResourceOf(key))
	if !ok {
		return nil, fmt.Errorf("no resource stored under %q", key)
	}
	return r, nil
}

// Decode implements storage.Codec.
func (c Codec) Decode(key string, raw []byte) (runtime.Object, error) {
	r, err := c.resource(key)
	if err != nil {
		return nil, err
	}
	obj := r.New()
	if err := limits.CheckJSONBody(reflect.TypeOf(obj), raw); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// Encode implements storage.Codec.
func (c Codec) Encode(obj runtime.Object) ([]byte, error) {
	return json.Marshal(obj)
}

// Index implements storage.Codec.
func (c Codec) Index(key string, obj runtime.Object) (labels.Set, fields.Set) {
	r, err := c.resource(key)
	if err != nil {
		return nil, nil
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	return labels.Set(acc.GetLabels()), r.Strategy.Fields(obj)
}

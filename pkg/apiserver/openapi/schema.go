package openapi

import (
	"reflect"
	"strings"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Extensions Kubernetes puts on schemas and operations.
const (
	extGVK           = "x-kubernetes-group-version-kind"
	extPatchStrategy = "x-kubernetes-patch-strategy"
	extPatchMergeKey = "x-kubernetes-patch-merge-key"
	extAction        = "x-kubernetes-action"
	extIntOrString   = "x-kubernetes-int-or-string"
	extPreserve      = "x-kubernetes-preserve-unknown-fields"
	extEmbedded      = "x-kubernetes-embedded-resource"
)

// definitions collects the schemas of Go API types, named as upstream names
// them ("io.k8s.api.core.v1.Pod").
type definitions map[string]*spec.Schema

// Interfaces API types implement to describe their JSON form.
type (
	modelNamer   interface{ OpenAPIModelName() string }
	schemaTyper  interface{ OpenAPISchemaType() []string }
	schemaFormer interface{ OpenAPISchemaFormat() string }
	oneOfTyper   interface{ OpenAPIV3OneOfTypes() []string }
)

// ModelName returns the schema name of a named Go type.
func ModelName(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n, ok := reflect.New(t).Interface().(modelNamer); ok {
		return n.OpenAPIModelName()
	}
	// "k8s.io/api/core/v1" becomes "io.k8s.api.core.v1".
	host, rest, _ := strings.Cut(t.PkgPath(), "/")
	parts := strings.Split(host, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	name := strings.Join(parts, ".")
	if rest != "" {
		name += "." + strings.ReplaceAll(rest, "/", ".")
	}
	return name + "." + t.Name()
}

func ref(name string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef("#/components/schemas/" + name)}}
}

// add records the schema of named type t and everything it refers to, and
// returns its name.
func (d definitions) add(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := ModelName(t)
	if _, ok := d[name]; ok {
		return name
	}
	s := &spec.Schema{}
	d[name] = s // placeholder first: types may refer to themselves
	if special, ok := specialSchema(t); ok {
		*s = special
		return name
	}
	if t.Kind() != reflect.Struct {
		*s = d.inline(t)
		return name
	}
	s.Type = spec.StringOrArray{"object"}
	s.Description = docs(t)[""]
	d.addFields(s, t)
	return name
}

// addFields adds the JSON fields of struct t (inlined structs included) to s.
func (d definitions) addFields(s *spec.Schema, t reflect.Type) {
	doc := docs(t)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				d.addFields(s, ft)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		prop := d.field(f.Type)
		prop.Description = doc[name]
		if ps := f.Tag.Get("patchStrategy"); ps != "" {
			prop.AddExtension(extPatchStrategy, ps)
		}
		if mk := f.Tag.Get("patchMergeKey"); mk != "" {
			prop.AddExtension(extPatchMergeKey, mk)
		}
		if s.Properties == nil {
			s.Properties = map[string]spec.Schema{}
		}
		s.Properties[name] = prop
	}
}

// docs returns the descriptions of a type ("") and its fields (by JSON name)
// that the API types carry.
func docs(t reflect.Type) map[string]string {
	if d, ok := reflect.New(t).Interface().(interface{ SwaggerDoc() map[string]string }); ok {
		return d.SwaggerDoc()
	}
	return nil
}

// field returns the schema of a field of type t: a reference for named
// structs and special types, the schema itself otherwise.
func (d definitions) field(t reflect.Type) spec.Schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if _, ok := specialSchema(t); ok || (t.Kind() == reflect.Struct && t.Name() != "") {
		return ref(d.add(t))
	}
	return d.inline(t)
}

// inline returns the schema of an unnamed or basic type.
func (d definitions) inline(t reflect.Type) spec.Schema {
	switch t.Kind() {
	case reflect.String:
		return typed("string", "")
	case reflect.Bool:
		return typed("boolean", "")
	case reflect.Int, reflect.Int32, reflect.Int16, reflect.Int8, reflect.Uint16, reflect.Uint8:
		return typed("integer", "int32")
	case reflect.Int64, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return typed("integer", "int64")
	case reflect.Float32, reflect.Float64:
		return typed("number", "double")
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return typed("string", "byte")
		}
		item := d.field(t.Elem())
		s := typed("array", "")
		s.Items = &spec.SchemaOrArray{Schema: &item}
		return s
	case reflect.Map:
		val := d.field(t.Elem())
		s := typed("object", "")
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: &val}
		return s
	case reflect.Struct:
		s := typed("object", "")
		d.addFields(&s, t)
		return s
	}
	// interface{} and anything else: arbitrary JSON.
	s := spec.Schema{}
	s.AddExtension(extPreserve, true)
	return s
}

// specialSchema returns the schema of types whose JSON form is not their Go
// structure (times, quantities, int-or-string, raw extensions).
func specialSchema(t reflect.Type) (spec.Schema, bool) {
	if t.Name() == "" {
		return spec.Schema{}, false
	}
	v := reflect.New(t).Interface()
	if t.Name() == "RawExtension" && strings.HasSuffix(t.PkgPath(), "apimachinery/pkg/runtime") {
		s := typed("object", "")
		s.AddExtension(extEmbedded, true)
		s.AddExtension(extPreserve, true)
		return s, true
	}
	st, ok := v.(schemaTyper)
	if !ok {
		return spec.Schema{}, false
	}
	format := ""
	if f, ok := v.(schemaFormer); ok {
		format = f.OpenAPISchemaFormat()
	}
	if o, ok := v.(oneOfTyper); ok {
		s := spec.Schema{SchemaProps: spec.SchemaProps{Format: format}}
		for _, typ := range o.OpenAPIV3OneOfTypes() {
			s.OneOf = append(s.OneOf, typed(typ, ""))
		}
		if format == "int-or-string" {
			s.AddExtension(extIntOrString, true)
		}
		return s, true
	}
	s := spec.Schema{SchemaProps: spec.SchemaProps{Type: st.OpenAPISchemaType(), Format: format}}
	return s, true
}

func typed(typ, format string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}, Format: format}}
}

// Package kubeletconfig reads the kubelet's configuration file (a KubeletConfiguration,
// kubelet.config.k8s.io/v1beta1, YAML or JSON) and its drop-in directory, merges them as upstream merges
// kubelet.conf.d, and decodes the result strictly: an unknown field, a field this kubelet does not honour,
// or a field it fixes written with another value is an error naming the field.
//
// Its errors are classified by type, never by their text: a *FieldError (found with errors.As) names the
// field's dotted path, and wraps one of the classes ErrUnknownField, ErrNotSupported, ErrFixedValue,
// ErrWrongType or ErrWrongKind (checked with errors.Is).
//
// It owns neither the flags nor the options they set: the caller says which fields it honours, applies
// them, and lets its flags win. It does no I/O beyond reading the files it is given.
package kubeletconfig

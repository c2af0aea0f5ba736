package rest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/nodeagent/kubelet/pkg/apiserver/limits"
	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
)

var (
	apiScheme = newScheme()
	codecs    = serializer.NewCodecFactory(apiScheme)
)

// newScheme returns a scheme of every built-in kind plus meta.k8s.io's Table
// and options.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(metav1.AddMetaToScheme(s))
	// kubectl sends DeleteOptions as meta.k8s.io/v1.
	s.AddKnownTypes(metav1.SchemeGroupVersion, &metav1.DeleteOptions{}, &metav1.CreateOptions{},
		&metav1.UpdateOptions{}, &metav1.PatchOptions{}, &metav1.ListOptions{}, &metav1.GetOptions{})
	return s
}

// MaxBodyBytes is the largest request body accepted, as upstream.
const MaxBodyBytes = 3 * 1024 * 1024

const (
	mediaJSON     = runtime.ContentTypeJSON
	mediaYAML     = runtime.ContentTypeYAML
	mediaProtobuf = runtime.ContentTypeProtobuf
)

// output is the negotiated response format.
type output struct {
	mediaType string
	table     bool // a meta.k8s.io Table was asked for
	info      runtime.SerializerInfo
}

func (o output) rawJSON() bool { return o.mediaType == mediaJSON && !o.table }

// negotiate picks the response format from the Accept header.
func negotiate(r *http.Request) (output, error) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		return outputFor(mediaJSON, false)
	}
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		table := params["as"] == "Table"
		if table && (params["g"] != "meta.k8s.io" || (params["v"] != "v1" && params["v"] != "v1beta1")) {
			continue
		}
		if params["as"] != "" && !table {
			continue
		}
		switch mt {
		case "*/*", "application/*", mediaJSON:
			return outputFor(mediaJSON, table)
		case mediaYAML, mediaProtobuf:
			if table && mt == mediaProtobuf {
				continue
			}
			return outputFor(mt, table)
		}
	}
	return output{}, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schema.GroupResource{}, "", "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf", 0, false)
}

func outputFor(mt string, table bool) (output, error) {
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mt)
	if !ok {
		return output{}, fmt.Errorf("no serializer for %s", mt)
	}
	return output{mediaType: mt, table: table, info: info}, nil
}

// encode writes obj (typed, its kind known to the scheme) in the format.
func (o output) encode(w http.ResponseWriter, code int, obj runtime.Object, gv schema.GroupVersion) {
	var buf bytes.Buffer
	enc := codecs.EncoderForVersion(o.info.Serializer, gv)
	if err := enc.Encode(obj, &buf); err != nil {
		writeError(w, apierrors.NewInternalError(fmt.Errorf("encode response: %w", err)))
		return
	}
	w.Header().Set("Content-Type", o.mediaType)
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// writeError writes err as a metav1.Status in JSON.
func writeError(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	if status.Status == "" {
		status.Status = metav1.StatusFailure
	}
	code := int(status.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	if d := status.Details; d != nil && d.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(d.RetryAfterSeconds)))
	}
	var buf bytes.Buffer
	_ = codecs.LegacyCodec(metav1.SchemeGroupVersion).Encode(&status, &buf)
	w.Header().Set("Content-Type", mediaJSON)
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// WriteError writes err as a metav1.Status; for use by the server's filters.
func WriteError(w http.ResponseWriter, err error) { writeError(w, err) }

// readBody reads a request body up to MaxBodyBytes.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", MaxBodyBytes))
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("read request body: %v", err))
	}
	return data, nil
}

// decodeBody decodes a create or update body into a new object of res's
// served kind, applying the fieldValidation directive. It returns warnings
// for fieldValidation=Warn.
func decodeBody(r *http.Request, res *registry.Resource, data []byte) (runtime.Object, []string, error) {
	info, err := bodySerializer(r)
	if err != nil {
		return nil, nil, err
	}
	return decodeWith(info, r.URL.Query().Get("fieldValidation"), res.GVK(), res.New(), data)
}

// bodySerializer returns the serializer for the request body's media type.
func bodySerializer(r *http.Request) (runtime.SerializerInfo, error) {
	ct := r.Header.Get("Content-Type")
	mt := mediaJSON
	if ct != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(ct); err != nil {
			return runtime.SerializerInfo{}, unsupportedMediaType(ct)
		}
	}
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mt)
	if !ok {
		return runtime.SerializerInfo{}, unsupportedMediaType(ct)
	}
	return info, nil
}

// decodeWith decodes data into into (of kind gvk) with info's serializer.
func decodeWith(info runtime.SerializerInfo, validation string, gvk schema.GroupVersionKind, into runtime.Object, data []byte) (runtime.Object, []string, error) {
	dec := info.Serializer
	if info.StrictSerializer != nil {
		dec = info.StrictSerializer
	}
	switch validation {
	case "", "Strict", "Warn", "Ignore":
	default:
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("fieldValidation must be one of Strict, Warn, Ignore, not %q", validation))
	}
	if err := checkQuantities(info.MediaType, into, data); err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v",
			gvk.Kind, gvk.GroupVersion().String(), gvk.Kind, err))
	}
	obj, _, err := dec.Decode(data, &gvk, into)
	var warnings []string
	if err != nil {
		if !runtime.IsStrictDecodingError(err) || obj == nil {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v",
				gvk.Kind, gvk.GroupVersion().String(), gvk.Kind, err))
		}
		switch validation {
		case "Strict":
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v",
				gvk.Kind, gvk.GroupVersion().String(), gvk.Kind, err))
		case "", "Warn":
			if sde, ok := runtime.AsStrictDecodingError(err); ok {
				for _, e := range sde.Errors() {
					warnings = append(warnings, e.Error())
				}
			} else {
				warnings = []string{err.Error()}
			}
		}
	}
	if obj != into {
		got := obj.GetObjectKind().GroupVersionKind()
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %s",
			gvk.Kind, got.String()))
	}
	return obj, warnings, nil
}

// checkQuantities refuses a body of the given media type, to be decoded into
// into, that holds a quantity whose parse or arithmetic would be unbounded
// (see package limits), before the decoder parses it.
func checkQuantities(mediaType string, into runtime.Object, data []byte) error {
	t := reflect.TypeOf(into)
	switch mediaType {
	case mediaJSON:
		return limits.CheckJSONBody(t, data)
	case mediaYAML:
		if !limits.HasQuantity(t) || !limits.MayHoldBadQuantity(data) {
			return nil
		}
		js, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil // the decoder refuses it
		}
		return limits.CheckJSONBody(t, js)
	case mediaProtobuf:
		return limits.CheckProto(t, data)
	}
	return nil
}

func addWarnings(w http.ResponseWriter, warnings []string) {
	for _, msg := range warnings {
		w.Header().Add("Warning", fmt.Sprintf("299 - %q", msg))
	}
}

func unsupportedMediaType(ct string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got %q)", ct),
	}}
}

package registry

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// eventStrategy acts on the stored (core/v1) form of Events.
type eventStrategy struct{ basic }

func (eventStrategy) Validate(obj runtime.Object) field.ErrorList {
	errs := validateMeta(obj, true, apivalidation.NameIsDNSSubdomain)
	ev := obj.(*corev1.Event)
	if ev.InvolvedObject.Namespace != "" && ev.InvolvedObject.Namespace != ev.Namespace {
		errs = append(errs, field.Invalid(field.NewPath("involvedObject", "namespace"), ev.InvolvedObject.Namespace,
			"does not match event.namespace"))
	}
	return errs
}

func (s eventStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	return append(validateMetaUpdate(obj, old), s.Validate(obj)...)
}

func (eventStrategy) Fields(obj runtime.Object) fields.Set {
	ev := obj.(*corev1.Event)
	f := metaFields(obj)
	f["involvedObject.kind"] = ev.InvolvedObject.Kind
	f["involvedObject.namespace"] = ev.InvolvedObject.Namespace
	f["involvedObject.name"] = ev.InvolvedObject.Name
	f["involvedObject.uid"] = string(ev.InvolvedObject.UID)
	f["involvedObject.apiVersion"] = ev.InvolvedObject.APIVersion
	f["involvedObject.resourceVersion"] = ev.InvolvedObject.ResourceVersion
	f["involvedObject.fieldPath"] = ev.InvolvedObject.FieldPath
	f["reason"] = ev.Reason
	f["reportingComponent"] = ev.ReportingController
	f["source"] = ev.Source.Component
	f["type"] = ev.Type
	return f
}

// eventsConverter serves events.k8s.io/v1 Events from core/v1 storage.
type eventsConverter struct{}

func (eventsConverter) ToStorage(obj runtime.Object) (runtime.Object, error) {
	in, ok := obj.(*eventsv1.Event)
	if !ok {
		return nil, fmt.Errorf("unexpected %T", obj)
	}
	out := &corev1.Event{
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Action:              in.Action,
		Related:             in.Related,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	out.APIVersion, out.Kind = "v1", "Event"
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out, nil
}

func (eventsConverter) FromStorage(obj runtime.Object) (runtime.Object, error) {
	in, ok := obj.(*corev1.Event)
	if !ok {
		return nil, fmt.Errorf("unexpected %T", obj)
	}
	out := &eventsv1.Event{
		ObjectMeta:               in.ObjectMeta,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	out.APIVersion, out.Kind = "events.k8s.io/v1", "Event"
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out, nil
}

func (eventsConverter) FieldLabel(label string) (string, bool) {
	switch label {
	case "metadata.name", "metadata.namespace", "reason", "type", "reportingController":
		if label == "reportingController" {
			return "reportingComponent", true
		}
		return label, true
	case "deprecatedSource.component":
		return "source", true
	}
	if rest, ok := strings.CutPrefix(label, "regarding."); ok {
		return "involvedObject." + rest, true
	}
	return "", false
}

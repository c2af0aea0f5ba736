package registry

import (
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateEphemeralVolume checks a generic ephemeral volume as upstream's
// validateEphemeralVolumeSource: it needs a volumeClaimTemplate, whose
// metadata has nothing but labels and annotations and whose spec is a valid
// claim's.
func validateEphemeralVolume(e *corev1.EphemeralVolumeSource, p *field.Path) field.ErrorList {
	if e.VolumeClaimTemplate == nil {
		return field.ErrorList{field.Required(p.Child("volumeClaimTemplate"), "")}
	}
	tp := p.Child("volumeClaimTemplate")
	errs := validateTemplateMeta(&e.VolumeClaimTemplate.ObjectMeta, tp.Child("metadata"))
	return append(errs, validateClaimSpec(&e.VolumeClaimTemplate.Spec, tp.Child("spec"))...)
}

// validateTemplateMeta is upstream's ValidateTemplateObjectMeta: valid labels
// and annotations, and no other field of the metadata set.
func validateTemplateMeta(m *metav1.ObjectMeta, p *field.Path) field.ErrorList {
	errs := apivalidation.ValidateAnnotations(m.Annotations, p.Child("annotations"))
	errs = append(errs, metav1validation.ValidateLabels(m.Labels, p.Child("labels"))...)
	v, t := reflect.ValueOf(*m), reflect.TypeOf(*m)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Name == "Labels" || f.Name == "Annotations" || v.Field(i).IsZero() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		errs = append(errs, field.Forbidden(p.Child(name), "cannot be set"))
	}
	return errs
}

// validateEphemeralClaimNames makes the checks of upstream's ValidateVolumes
// that need the pod's name: the claim `<pod>-<volume>` of each generic
// ephemeral volume must be a valid claim name, and no persistentVolumeClaim
// volume may name one of those claims.
func validateEphemeralClaimNames(pod *corev1.Pod, path *field.Path) field.ErrorList {
	if pod.Name == "" {
		return nil // the missing name is reported with the metadata
	}
	var errs field.ErrorList
	created := map[string]bool{}
	for i, v := range pod.Spec.Volumes {
		if v.Ephemeral == nil || v.Name == "" {
			continue
		}
		claim := pod.Name + "-" + v.Name
		created[claim] = true
		for _, msg := range apivalidation.NameIsDNSSubdomain(claim, false) {
			errs = append(errs, field.Invalid(path.Index(i).Child("name"), v.Name, fmt.Sprintf("PVC name %q: %v", claim, msg)))
		}
	}
	for i, v := range pod.Spec.Volumes {
		if c := v.PersistentVolumeClaim; c != nil && created[c.ClaimName] {
			errs = append(errs, field.Invalid(path.Index(i).Child("persistentVolumeClaim", "claimName"), c.ClaimName,
				"must not reference a PVC that gets created for an ephemeral volume"))
		}
	}
	return errs
}

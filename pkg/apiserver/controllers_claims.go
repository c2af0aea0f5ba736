package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// podResourceClaimsJSON is in the stored JSON of a pod with
// spec.resourceClaims (and, rarely, of one with a label of that name).
var podResourceClaimsJSON = []byte(`"resourceClaims":`)

// podClaimNameAnnotation marks a ResourceClaim made from a template with the
// name of the pod's claim it was made for, as upstream's controller does.
const podClaimNameAnnotation = "resource.kubernetes.io/pod-claim-name"

// claimEventComponent is the source upstream's ResourceClaim controller
// records its events under.
const claimEventComponent = "resource_claim"

// syncResourceClaims does what kube-controller-manager's ResourceClaim
// controller does: every pod not being deleted gets a ResourceClaim for each
// of its claims made from a ResourceClaimTemplate (see podClaimWork), named in
// its status.resourceClaimStatuses; every claim loses the reservations of pods
// that are gone or done, is deallocated when none are left, and is deleted
// when it was made for a pod that is done (see releaseClaim). The claims are
// read before the pods: a pod a claim is reserved for existed before the
// reservation, so a pod not found then is gone.
func (c *controller) syncResourceClaims(ctx context.Context) error {
	claimObjs, _ := c.s.store.List("resourceclaims/")
	claims := decodeAll[resourceapi.ResourceClaim](c.s, claimObjs)
	byNamespace := map[string][]*resourceapi.ResourceClaim{}
	for _, claim := range claims {
		byNamespace[claim.Namespace] = append(byNamespace[claim.Namespace], claim)
	}
	var errs []error
	pods := c.s.store.Select("pods/", func(o *storage.Object) bool {
		return bytes.Contains(o.Raw, podResourceClaimsJSON) && !bytes.Contains(o.Raw, deletionTimestampJSON)
	})
	for _, pod := range decodeAll[corev1.Pod](c.s, pods) {
		if err := c.syncPodClaims(ctx, pod, byNamespace[pod.Namespace]); err != nil {
			errs = append(errs, err)
		}
	}
	objs := objectIndex{store: c.s.store, codec: c.s.reg.Codec()}
	for _, claim := range claims {
		lookup := func(name string) *corev1.Pod {
			pod, _ := getObject[corev1.Pod](objs, "pods", claim.Namespace, name)
			return pod
		}
		if err := c.applyRelease(ctx, claim, releaseClaim(claim, lookup)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// podClaimWork returns what a pod not being deleted needs of the
// ResourceClaim controller, given the claims of its namespace: found holds
// the claims made for it earlier but missing in its status (the controller
// stopped between creating one and writing the status), by the pod's claim
// name; create the pod's claims to make from their templates. A claim named
// in the status that is gone or not the pod's is made again, as upstream's
// handleClaim does.
func podClaimWork(pod *corev1.Pod, claims []*resourceapi.ResourceClaim) (found map[string]string, create []corev1.PodResourceClaim) {
	for _, pc := range pod.Spec.ResourceClaims {
		name, mustCheckOwner, err := resourceclaim.Name(pod, &pc)
		switch {
		case errors.Is(err, resourceclaim.ErrClaimNotFound):
		case err != nil, name == nil:
			continue
		case *name != "":
			if claim := claimNamed(claims, *name); claim != nil && (!mustCheckOwner || resourceclaim.IsForPod(pod, claim) == nil) {
				continue
			}
		}
		if pc.ResourceClaimTemplateName == nil {
			continue
		}
		if orphan := generatedClaim(pod, pc.Name, claims); orphan != nil {
			if found == nil {
				found = map[string]string{}
			}
			found[pc.Name] = orphan.Name
			continue
		}
		create = append(create, pc)
	}
	return found, create
}

func claimNamed(claims []*resourceapi.ResourceClaim, name string) *resourceapi.ResourceClaim {
	for _, c := range claims {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// generatedClaim returns the claim made for pod's claim podClaim: controlled
// by the pod and annotated with podClaim (upstream's findPodResourceClaim).
func generatedClaim(pod *corev1.Pod, podClaim string, claims []*resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	for _, c := range claims {
		if name, uid := owningPod(c); name != "" && uid == pod.UID && c.Namespace == pod.Namespace &&
			c.Annotations[podClaimNameAnnotation] == podClaim && c.DeletionTimestamp == nil {
			return c
		}
	}
	return nil
}

// owningPod returns the pod controlling claim, if any.
func owningPod(claim *resourceapi.ResourceClaim) (string, types.UID) {
	for _, o := range claim.OwnerReferences {
		if ptr.Deref(o.Controller, false) && o.APIVersion == "v1" && o.Kind == "Pod" {
			return o.Name, o.UID
		}
	}
	return "", ""
}

// claimGenerateName is the generateName of the claim made for pod's claim
// podClaim: "<pod>-<podClaim>-", both cut in proportion to their lengths
// to leave room for the random suffix within 63 characters, as upstream does.
func claimGenerateName(pod, podClaim string) string {
	const maxBaseLen = 57
	name := pod + "-" + podClaim + "-"
	if len(name) > maxBaseLen {
		name = pod[:len(pod)*maxBaseLen/len(name)] + "-" + podClaim[:len(podClaim)*maxBaseLen/len(name)]
	}
	return name
}

// claimFromTemplate is the claim made for pod's claim podClaim from
// template: the template's labels, annotations and spec, the pod as its
// controller, and the annotation naming podClaim.
func claimFromTemplate(pod *corev1.Pod, podClaim string, template *resourceapi.ResourceClaimTemplate) *resourceapi.ResourceClaim {
	annotations := maps.Clone(template.Spec.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[podClaimNameAnnotation] = podClaim
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: claimGenerateName(pod.Name, podClaim), Namespace: pod.Namespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
				Controller: ptr.To(true)}},
			Annotations: annotations, Labels: maps.Clone(template.Spec.Labels),
		},
		Spec: *template.Spec.Spec.DeepCopy(),
	}
}

// mergeClaimStatuses returns statuses with the claim names in add set (an
// entry replaced or added), sorted by the pod's claim name; nil when nothing
// changes.
func mergeClaimStatuses(statuses []corev1.PodResourceClaimStatus, add map[string]string) []corev1.PodResourceClaimStatus {
	out := slices.Clone(statuses)
	changed := false
	for name, claim := range add {
		i := slices.IndexFunc(out, func(s corev1.PodResourceClaimStatus) bool { return s.Name == name })
		switch {
		case i < 0:
			out = append(out, corev1.PodResourceClaimStatus{Name: name, ResourceClaimName: ptr.To(claim)})
		case ptr.Deref(out[i].ResourceClaimName, "") == claim:
			continue
		default:
			out[i].ResourceClaimName = ptr.To(claim)
		}
		changed = true
	}
	if !changed {
		return nil
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// syncPodClaims makes the missing claims of one pod from their templates and
// names them in its status. It stops at the first claim that fails, which
// the pod is told of by a FailedResourceClaimCreation warning, as upstream.
func (c *controller) syncPodClaims(ctx context.Context, pod *corev1.Pod, claims []*resourceapi.ResourceClaim) error {
	found, create := podClaimWork(pod, claims)
	var failed error
	for _, pc := range create {
		name, err := c.createTemplateClaim(ctx, pod, pc)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			failed = fmt.Errorf("PodResourceClaim %s: %w", pc.Name, err)
			break
		}
		if found == nil {
			found = map[string]string{}
		}
		found[pc.Name] = name
	}
	if statuses := mergeClaimStatuses(pod.Status.ResourceClaimStatuses, found); statuses != nil {
		pod.Status.ResourceClaimStatuses = statuses
		_, err := c.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("update pod %s/%s ResourceClaimStatuses: %w", pod.Namespace, pod.Name, err)
		}
	}
	if failed == nil {
		return nil
	}
	if err := c.warnPod(ctx, pod, claimEventComponent, "FailedResourceClaimCreation", failed.Error()); err != nil {
		return err
	}
	return fmt.Errorf("pod %s/%s, %w", pod.Namespace, pod.Name, failed)
}

// createTemplateClaim creates the claim for pod's claim pc from its template
// and returns its name.
func (c *controller) createTemplateClaim(ctx context.Context, pod *corev1.Pod, pc corev1.PodResourceClaim) (string, error) {
	objs := objectIndex{store: c.s.store, codec: c.s.reg.Codec()}
	template, err := getObject[resourceapi.ResourceClaimTemplate](objs, "resourceclaimtemplates", pod.Namespace, *pc.ResourceClaimTemplateName)
	if err != nil {
		// Worded as upstream's lister words it.
		err = apierrors.NewNotFound(schema.GroupResource{Group: resourceapi.GroupName, Resource: "resourceclaimtemplate"},
			*pc.ResourceClaimTemplateName)
		return "", fmt.Errorf("resource claim template %q: %w", *pc.ResourceClaimTemplateName, err)
	}
	claim := claimFromTemplate(pod, pc.Name, template)
	created, err := c.client.ResourceV1().ResourceClaims(pod.Namespace).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create ResourceClaim %s: %w", claim.GenerateName, err)
	}
	return created.Name, nil
}

package rest

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// deleteOptions reads DeleteOptions from the body, or the query.
func (q *req) deleteOptions() (*metav1.DeleteOptions, error) {
	data, err := readBody(q.r)
	if err != nil {
		return nil, err
	}
	opts := &metav1.DeleteOptions{}
	if len(data) > 0 {
		info, err := bodySerializer(q.r)
		if err != nil {
			return nil, err
		}
		gvk := metav1.SchemeGroupVersion.WithKind("DeleteOptions")
		if _, _, err := decodeWith(info, "Ignore", gvk, opts, data); err != nil {
			return nil, err
		}
	}
	if s := q.r.URL.Query().Get("gracePeriodSeconds"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid gracePeriodSeconds %q", s))
		}
		opts.GracePeriodSeconds = &n
	}
	query := q.r.URL.Query()
	if s := query.Get("propagationPolicy"); s != "" {
		p := metav1.DeletionPropagation(s)
		opts.PropagationPolicy = &p
	}
	if s := query.Get("orphanDependents"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid orphanDependents %q", s))
		}
		opts.OrphanDependents = &b //nolint:staticcheck // still served, as upstream
	}
	if err := q.bodyDryRun(opts); err != nil {
		return nil, err
	}
	if errs := metav1validation.ValidateDeleteOptions(opts); len(errs) > 0 {
		return nil, apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("DeleteOptions").GroupKind(), "", errs)
	}
	return opts, nil
}

func (q *req) delete() {
	opts, err := q.deleteOptions()
	if err != nil {
		q.fail(err)
		return
	}
	if ptr.Deref(opts.IgnoreStoreReadErrorWithClusterBreakingPotential, false) {
		q.deleteCorrupt()
		return
	}
	o, typed, err := q.deleteOne(q.key(), q.info.Name, opts)
	if err != nil {
		q.fail(err)
		return
	}
	q.writeObject(http.StatusOK, o, typed)
}

// adminGroup may delete corrupt objects: upstream asks the authorizer for the verb
// unsafe-delete-ignore-read-errors, which only its cluster-admin role grants; here, as auth.GroupMasters.
const adminGroup = "system:masters"

// deleteCorrupt removes a stored object that does not decode, as upstream's DELETE with
// ignoreStoreReadErrorWithClusterBreakingPotential: for admins only, without admission, finalizers or
// graceful deletion (nothing of the object can be read), and only for a corrupt object.
func (q *req) deleteCorrupt() {
	gr := q.res.GroupResource()
	if q.user == nil || !q.user.InGroup(adminGroup) {
		name := ""
		if q.user != nil {
			name = q.user.Name
		}
		q.fail(apierrors.NewForbidden(gr, q.info.Name, fmt.Errorf(
			"user %q cannot unsafe-delete-ignore-read-errors: only members of %s may delete with ignoreStoreReadErrorWithClusterBreakingPotential",
			name, adminGroup)))
		return
	}
	key := q.key()
	notCorrupt := apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: gr.Resource}, q.info.Name, field.ErrorList{
		field.Invalid(field.NewPath("ignoreStoreReadErrorWithClusterBreakingPotential"), true,
			"is exclusively used to delete corrupt object(s), try again by removing this option")})
	o, ok := q.h.store.Get(key)
	switch {
	case !ok:
		q.fail(apierrors.NewNotFound(gr, q.info.Name))
		return
	case o.Corrupt == nil:
		q.fail(notCorrupt)
		return
	}
	if !q.dryRun {
		tomb := q.res.NewStored()
		acc, err := meta.Accessor(tomb)
		if err != nil {
			q.fail(err)
			return
		}
		acc.SetNamespace(q.ns())
		acc.SetName(q.info.Name)
		klog.FromContext(q.r.Context()).Info("Deleting a corrupt stored object", "key", key, "user", q.user.Name)
		gone, err := q.h.store.DeleteCorrupt(key, tomb)
		switch {
		case errors.Is(err, storage.ErrNotCorrupt):
			q.fail(notCorrupt)
			return
		case err != nil:
			q.fail(err)
			return
		case gone == nil:
			q.fail(apierrors.NewNotFound(gr, q.info.Name))
			return
		}
	}
	q.writeStatus(http.StatusOK, &metav1.Status{Status: metav1.StatusSuccess,
		Details: &metav1.StatusDetails{Name: q.info.Name, Group: gr.Group, Kind: gr.Resource}})
}

// deleteOne deletes one object, gracefully for a pod bound to a node, and
// only marks it while finalizers remain.
func (q *req) deleteOne(key, name string, opts *metav1.DeleteOptions) (*storage.Object, runtime.Object, error) {
	now := q.h.opts.Clock.Now()
	return q.write(key, func(cur runtime.Object) (runtime.Object, error) {
		if cur == nil {
			return nil, apierrors.NewNotFound(q.res.GroupResource(), name)
		}
		acc, _ := meta.Accessor(cur)
		if p := opts.Preconditions; p != nil {
			if p.UID != nil && *p.UID != acc.GetUID() {
				return nil, apierrors.NewConflict(q.res.GroupResource(), name, fmt.Errorf(
					"Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, acc.GetUID()))
			}
			if p.ResourceVersion != nil && *p.ResourceVersion != acc.GetResourceVersion() {
				return nil, apierrors.NewConflict(q.res.GroupResource(), name, fmt.Errorf(
					"Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v",
					*p.ResourceVersion, acc.GetResourceVersion()))
			}
		}
		if err := q.admit(q.r.Context(), nil, cur); err != nil {
			return nil, err
		}
		grace := gracePeriod(cur, opts)
		// As upstream, the garbage collector's finalizers follow the options
		// unless a graceful deletion is already under way.
		if pending := acc.GetDeletionGracePeriodSeconds(); acc.GetDeletionTimestamp() == nil || pending == nil || *pending == 0 {
			acc.SetFinalizers(GCFinalizers(acc.GetFinalizers(), opts))
		}
		if old := acc.GetDeletionGracePeriodSeconds(); acc.GetDeletionTimestamp() == nil || old == nil || grace < *old {
			ts := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
			if dt := acc.GetDeletionTimestamp(); dt != nil && dt.Before(&ts) {
				ts = *dt
			}
			acc.SetDeletionTimestamp(&ts)
			acc.SetDeletionGracePeriodSeconds(&grace)
		}
		if finalized(acc) {
			return nil, nil
		}
		if ns, ok := cur.(*corev1.Namespace); ok {
			ns.Status.Phase = corev1.NamespaceTerminating
		}
		return cur, nil
	})
}

// bodyDryRun honours dryRun given in DeleteOptions in the body.
func (q *req) bodyDryRun(opts *metav1.DeleteOptions) error {
	dry, err := parseDryRun(opts.DryRun)
	q.dryRun = q.dryRun || dry
	return err
}

// gracePeriod returns the deletion grace period: a pod bound to a node and not
// finished waits for its node; everything else goes at once.
func gracePeriod(obj runtime.Object, opts *metav1.DeleteOptions) int64 {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return 0
	}
	g := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if opts.GracePeriodSeconds != nil {
		g = *opts.GracePeriodSeconds
	}
	if g < 0 {
		g = 1
	}
	return g
}

func (q *req) deleteCollection() {
	opts, err := q.deleteOptions()
	if err != nil {
		q.fail(err)
		return
	}
	q.r.URL.RawQuery = withoutParam(q.r.URL.Query(), "limit", "continue").Encode()
	page, err := q.listObjects()
	if err != nil {
		q.fail(err)
		return
	}
	for _, o := range page.items {
		name := o.Key[len(storage.ResourceOf(o.Key))+1:]
		name = name[len(namespaceOf(name))+1:]
		if _, _, err := q.deleteOne(o.Key, name, opts); err != nil && !apierrors.IsNotFound(err) {
			q.fail(err)
			return
		}
	}
	q.writeStatus(http.StatusOK, &metav1.Status{Status: metav1.StatusSuccess})
}

func namespaceOf(nsName string) string {
	for i := 0; i < len(nsName); i++ {
		if nsName[i] == '/' {
			return nsName[:i]
		}
	}
	return ""
}

func withoutParam(v map[string][]string, names ...string) (out url.Values) {
	out = url.Values{}
	for k, vals := range v {
		out[k] = vals
	}
	for _, n := range names {
		delete(out, n)
	}
	return out
}

func (q *req) writeStatus(code int, st *metav1.Status) {
	st.Code = int32(code)
	out, _ := outputFor(mediaJSON, false)
	out.encode(q.w, code, st, metav1.SchemeGroupVersion)
}

// bind serves pods/binding: it assigns a pending pod to a node once.
func (q *req) bind() {
	b := &corev1.Binding{}
	if !q.decodeBody(corev1.SchemeGroupVersion.WithKind("Binding"), b) {
		return
	}
	if b.Name != "" && b.Name != q.info.Name {
		q.fail(apierrors.NewBadRequest("the name of the binding does not match the pod"))
		return
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" || b.Target.Name == "" {
		q.fail(apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, q.info.Name, nil))
		return
	}
	_, _, err := q.write(q.key(), func(cur runtime.Object) (runtime.Object, error) {
		if cur == nil {
			return nil, apierrors.NewNotFound(q.res.GroupResource(), q.info.Name)
		}
		pod := cur.(*corev1.Pod)
		old := pod.DeepCopy()
		if err := BindPod(pod, b.Target.Name, q.h.opts.Clock.Now()); err != nil {
			return nil, apierrors.NewConflict(q.res.GroupResource(), q.info.Name, err)
		}
		return pod, q.admit(q.r.Context(), pod, old)
	})
	if err != nil {
		q.fail(err)
		return
	}
	q.writeStatus(http.StatusCreated, &metav1.Status{Status: metav1.StatusSuccess})
}

// BindPod assigns pod to node and records the PodScheduled condition; it
// fails when the pod is bound already or being deleted.
func BindPod(pod *corev1.Pod, node string, now time.Time) error {
	if pod.DeletionTimestamp != nil {
		return fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name)
	}
	if pod.Spec.NodeName != "" {
		return fmt.Errorf("pod %v is already assigned to node %q", pod.Name, pod.Spec.NodeName)
	}
	pod.Spec.NodeName = node
	SetPodCondition(&pod.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))})
	return nil
}

// SetPodCondition adds or replaces the condition of c's type.
func SetPodCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			if st.Conditions[i].Status == c.Status {
				c.LastTransitionTime = st.Conditions[i].LastTransitionTime
			}
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

// evict serves pods/eviction: without disruption budgets it deletes the pod.
func (q *req) evict() {
	ev := &policyv1.Eviction{}
	if !q.decodeBody(policyv1.SchemeGroupVersion.WithKind("Eviction"), ev) {
		return
	}
	opts := ev.DeleteOptions
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	if err := q.bodyDryRun(opts); err != nil {
		q.fail(err)
		return
	}
	if _, _, err := q.deleteOne(q.key(), q.info.Name, opts); err != nil {
		q.fail(err)
		return
	}
	q.writeStatus(http.StatusCreated, &metav1.Status{Status: metav1.StatusSuccess})
}

// GCFinalizers returns finalizers with the garbage collector's two (orphan,
// foregroundDeletion) set as a delete with opts asks, as upstream's
// deletionFinalizersForGarbageCollection: an explicit policy wins, then the
// finalizer already present; the default is background (neither).
func GCFinalizers(finalizers []string, opts *metav1.DeleteOptions) []string {
	hadOrphan, hadForeground := false, false
	for _, f := range finalizers {
		switch f {
		case metav1.FinalizerOrphanDependents:
			hadOrphan = true
		case metav1.FinalizerDeleteDependents:
			hadForeground = true
		}
	}
	orphan, foreground := hadOrphan, hadForeground && !hadOrphan // both: refused by validation
	switch {
	case opts.OrphanDependents != nil: //nolint:staticcheck // still served, as upstream
		orphan, foreground = *opts.OrphanDependents, false //nolint:staticcheck
	case opts.PropagationPolicy != nil:
		orphan = *opts.PropagationPolicy == metav1.DeletePropagationOrphan
		foreground = *opts.PropagationPolicy == metav1.DeletePropagationForeground
	}
	if orphan == hadOrphan && foreground == hadForeground {
		return finalizers
	}
	var out []string
	for _, f := range finalizers {
		if f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
			out = append(out, f)
		}
	}
	if orphan {
		out = append(out, metav1.FinalizerOrphanDependents)
	}
	if foreground {
		out = append(out, metav1.FinalizerDeleteDependents)
	}
	return out
}

// decodeBody reads the request body and decodes it as gvk into into; on failure it has answered the request.
func (q *req) decodeBody(gvk schema.GroupVersionKind, into runtime.Object) bool {
	data, err := readBody(q.r)
	if err != nil {
		q.fail(err)
		return false
	}
	info, err := bodySerializer(q.r)
	if err != nil {
		q.fail(err)
		return false
	}
	if _, _, err := decodeWith(info, "", gvk, into, data); err != nil {
		q.fail(err)
		return false
	}
	return true
}

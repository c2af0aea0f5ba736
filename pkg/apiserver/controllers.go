package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
	"github.com/nodeagent/kubelet/pkg/apiserver/placement"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// controllerResync is how often the control loops run without changes.
const controllerResync = time.Second

// startControllers starts the control loop that does what upstream's
// namespace, service-account, root CA publisher, persistent volume binder,
// ephemeral volume, ResourceClaim, attach/detach (VolumeAttachments only), node lifecycle
// (heartbeats, pressure and readiness taints), taint eviction and pod GC
// controllers, its scheduler and kube-apiserver's kubernetes Service
// reconciler do, in the small: it observes the store directly and acts through the API as an
// admin client, so every write goes through the same rules as a user's.
func (s *Server) startControllers(ctx context.Context) error {
	rc, err := s.ClientConfig("system:apiserver", []string{auth.GroupMasters})
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	c := &controller{s: s, client: client, graph: newOwnerGraph(s.reg)}
	go s.metrics.Run(ctx)
	tick := s.cfg.Clock.NewTicker(controllerResync)
	go func() {
		defer tick.Stop()
		c.run(ctx, tick.C())
	}()
	return nil
}

type controller struct {
	s      *Server
	client kubernetes.Interface
	graph  *ownerGraph
	health nodeHealth
	// nextEventSweep is when expired events are next looked for.
	nextEventSweep time.Time
	// attached holds the names of the VolumeAttachments known to be the
	// attachment loop's own (see rememberAttachments).
	attached map[string]bool
	// nextClaimsSweep is when the periodic pass next runs the ResourceClaim
	// controller; claimsFailed makes it run at every pass until it succeeds.
	nextClaimsSweep time.Time
	claimsFailed    bool
}

// claimsSweepEvery is how often the periodic pass runs the ResourceClaim
// controller, which reads every claim and every pod with claims: the changes
// to claims and pods run it as they happen, the sweep only catches what a
// failed write left.
const claimsSweepEvery = 10 * time.Second

// syncClaims runs the ResourceClaim controller and remembers whether it
// failed.
func (c *controller) syncClaims(ctx context.Context) {
	err := c.syncResourceClaims(ctx)
	c.claimsFailed = err != nil
	c.report(ctx, "Resource claims", err)
}

func (c *controller) run(ctx context.Context, tick <-chan time.Time) {
	logger := klog.FromContext(ctx)
	w, err := c.s.store.Watch("", c.s.store.CurrentRV())
	if err != nil {
		logger.Error(err, "Control loop cannot watch the store")
		return
	}
	c.graph.rebuild(c.s.store)
	// resync holds at most one pending periodic pass.
	resync := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case <-tick:
				select {
				case resync <- struct{}{}:
				default:
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	c.sync(ctx)
	for {
		evs, err := w.Next(ctx, resync)
		if ctx.Err() != nil {
			return
		}
		if err != nil { // fell out of the window: start over from now
			w, _ = c.s.store.Watch("", c.s.store.CurrentRV())
			c.graph.rebuild(c.s.store)
			c.sync(ctx)
			continue
		}
		for _, ev := range evs {
			c.graph.observe(ev)
		}
		full := evs == nil // woken for the periodic pass
		if !full {         // a steady stream of changes must not starve it
			select {
			case <-resync:
				full = true
			default:
			}
		}
		if full {
			c.sync(ctx)
		} else {
			c.syncChanges(ctx, evs)
		}
	}
}

// sync runs one pass of every loop; errors are retried on the next pass.
func (c *controller) sync(ctx context.Context) {
	nodes := c.nodes()
	c.report(ctx, "Namespace sync", c.syncNamespaces(ctx, nodes))
	c.report(ctx, "Node health", c.syncNodeHealth(ctx, nodes))
	c.report(ctx, "Node pod CIDRs", c.assignPodCIDRs(ctx, nodes))
	c.report(ctx, "Node taints", c.syncTaints(ctx, nodes))
	c.report(ctx, "Taint eviction", c.evictPods(ctx, nodes))
	if now := c.s.cfg.Clock.Now(); c.claimsFailed || !now.Before(c.nextClaimsSweep) {
		c.nextClaimsSweep = now.Add(claimsSweepEvery)
		c.syncClaims(ctx)
	}
	c.report(ctx, "Placement", c.schedule(ctx, nodes))
	c.report(ctx, "Pod cleanup", c.collectPods(ctx, nodes))
	c.graph.requeue()
	c.report(ctx, "Garbage collection", c.collectGarbage(ctx))
	c.report(ctx, "Event expiry", c.expireEvents(ctx))
	c.report(ctx, "Ephemeral volumes", c.createEphemeralClaims(ctx))
	c.report(ctx, "Volume binding", c.bindVolumes(ctx))
	c.report(ctx, "Volume attachment", c.syncAttachments(ctx))
	c.report(ctx, "Kubernetes service", c.syncKubernetesService(ctx))
}

// syncChanges runs the loops the changes in evs concern (see loopsFor);
// everything else waits for the periodic pass.
func (c *controller) syncChanges(ctx context.Context, evs []storage.Event) {
	need := loopsFor(evs)
	if need == (loops{}) && len(c.graph.pending) == 0 {
		return
	}
	var nodes map[string]*corev1.Node
	if need.namespaces || need.schedule || need.collect || need.taints {
		nodes = c.nodes()
	}
	if need.namespaces {
		c.report(ctx, "Namespace sync", c.syncNamespaces(ctx, nodes))
	}
	if need.taints {
		c.report(ctx, "Node pod CIDRs", c.assignPodCIDRs(ctx, nodes))
		c.report(ctx, "Node taints", c.syncTaints(ctx, nodes))
	}
	if need.claims {
		c.syncClaims(ctx)
	}
	if need.schedule {
		c.report(ctx, "Placement", c.schedule(ctx, nodes))
	}
	if need.collect {
		c.report(ctx, "Pod cleanup", c.collectPods(ctx, nodes))
	}
	if len(c.graph.pending) > 0 {
		c.report(ctx, "Garbage collection", c.collectGarbage(ctx))
	}
	if need.ephemeral {
		c.report(ctx, "Ephemeral volumes", c.createEphemeralClaims(ctx))
	}
	if need.volumes {
		c.report(ctx, "Volume binding", c.bindVolumes(ctx))
	}
	if need.attach {
		c.report(ctx, "Volume attachment", c.syncAttachments(ctx))
	}
	if need.kubernetesService {
		c.report(ctx, "Kubernetes service", c.syncKubernetesService(ctx))
	}
}

func (c *controller) report(ctx context.Context, what string, err error) {
	if err != nil && ctx.Err() == nil {
		klog.FromContext(ctx).V(2).Info(what+" failed", "err", err)
	}
}

// loops says which control loops have work.
type loops struct {
	schedule, collect, namespaces, volumes, kubernetesService, taints, ephemeral, attach, claims bool
}

// loopsFor returns the loops a batch of changes concerns, so that a write
// costs the loops nothing unless it is theirs: a pod waiting for a node, a
// terminating pod (its node may be gone), a namespace, an object leaving a
// namespace (which may be terminating), a node, a namespace's
// kube-root-ca.crt, a volume or claim, the kubernetes Service. The ephemeral
// volume loop wants a pod with a generic ephemeral volume and a claim removed;
// the attachment loop a pod on a node with claims or ephemeral volumes, a
// claim, volume, CSIDriver or VolumeAttachment, and a node added, removed or
// whose volumes in use change. The ResourceClaim loop wants a pod with
// resourceClaims and a ResourceClaim or ResourceClaimTemplate; placement also
// a claim, ResourceSlice or DeviceClass, which may let a pod with claims fit,
// and a PersistentVolume, PersistentVolumeClaim or StorageClass, which may
// let a pod with volume claims fit or finish its claims' binding.
// The garbage collector keeps its own account of the changes it needs
// (ownerGraph.observe).
func loopsFor(evs []storage.Event) loops {
	var l loops
	for _, ev := range evs {
		o := ev.Object
		switch storage.ResourceOf(o.Key) {
		case "pods":
			hasClaims := bytes.Contains(o.Raw, claimVolumeJSON) || bytes.Contains(o.Raw, ephemeralVolumeJSON)
			l.attach = l.attach || hasClaims && o.Fields["spec.nodeName"] != ""
			l.ephemeral = l.ephemeral || ev.Type != watch.Deleted && bytes.Contains(o.Raw, ephemeralVolumeJSON)
			l.claims = l.claims || bytes.Contains(o.Raw, podResourceClaimsJSON)
			switch {
			case ev.Type == watch.Deleted:
				l.namespaces = true
			case o.Fields["spec.nodeName"] == "":
				l.schedule = l.schedule || o.Fields["spec.schedulerName"] == corev1.DefaultSchedulerName
			case bytes.Contains(o.Raw, deletionTimestampJSON):
				l.collect = true
			}
		case "namespaces":
			l.namespaces = true
		case "configmaps":
			l.namespaces = l.namespaces || ev.Type == watch.Deleted || isRootCAKey(o.Key)
		case "nodes":
			l.schedule, l.collect, l.taints = true, true, true
			l.attach = l.attach || ev.Type != watch.Modified || bytes.Contains(o.Raw, volumesInUseJSON) ||
				ev.Prev != nil && bytes.Contains(ev.Prev.Raw, volumesInUseJSON)
		case "persistentvolumes", "persistentvolumeclaims":
			l.volumes, l.attach, l.schedule = true, true, true
			l.ephemeral = l.ephemeral || ev.Type == watch.Deleted && storage.ResourceOf(o.Key) == "persistentvolumeclaims"
			l.namespaces = l.namespaces || ev.Type == watch.Deleted
		case "services":
			l.kubernetesService = l.kubernetesService || o.Key == "services/default/"+KubernetesService
			l.namespaces = l.namespaces || ev.Type == watch.Deleted
		case "leases", "events":
		case "csidrivers", "volumeattachments":
			l.attach = true
		case "resourceclaims", "resourceclaimtemplates":
			l.claims, l.schedule = true, true
			l.namespaces = l.namespaces || ev.Type == watch.Deleted
		case "resourceslices", "deviceclasses":
			l.schedule = true
		case "storageclasses":
			l.volumes, l.schedule = true, true
		case "csinodes": // cluster-scoped: no loop's business
		default:
			l.namespaces = l.namespaces || ev.Type == watch.Deleted
		}
	}
	return l
}

// deletionTimestampJSON is in the stored JSON of an object being deleted.
var deletionTimestampJSON = []byte(`"deletionTimestamp":`)

// volumesInUseJSON is in the stored JSON of a node whose kubelet reports
// volumes in use.
var volumesInUseJSON = []byte(`"volumesInUse":`)

func decodeAll[T any](s *Server, objs []*storage.Object) []*T {
	out := make([]*T, 0, len(objs))
	for _, o := range objs {
		obj, err := s.store.Decode(o)
		if err != nil {
			continue
		}
		if t, ok := any(obj).(*T); ok {
			out = append(out, t)
		}
	}
	return out
}

func (c *controller) nodes() map[string]*corev1.Node {
	objs, _ := c.s.store.List("nodes/")
	out := map[string]*corev1.Node{}
	for _, n := range decodeAll[corev1.Node](c.s, objs) {
		out[n.Name] = n
	}
	return out
}

// namespacedStorage lists the stored resources that live in namespaces.
func (c *controller) namespacedStorage() []string {
	var out []string
	for _, r := range c.s.reg.All() {
		if r.Namespaced && r.Stored() {
			out = append(out, r.Storage)
		}
	}
	return out
}

// syncNamespaces gives active namespaces their default service account and
// kube-root-ca.crt ConfigMap (re-created when deleted, repaired when changed),
// and empties deleting ones (pods gracefully) before finalizing them.
func (c *controller) syncNamespaces(ctx context.Context, nodes map[string]*corev1.Node) error {
	objs, _ := c.s.store.List("namespaces/")
	for _, ns := range decodeAll[corev1.Namespace](c.s, objs) {
		if ns.DeletionTimestamp == nil {
			if err := c.s.ensureServiceAccount(ctx, ns.Name); err != nil {
				return err
			}
			if err := c.publishRootCA(ctx, ns.Name); err != nil {
				return err
			}
			continue
		}
		remaining := 0
		for _, storageName := range c.namespacedStorage() {
			res, _ := c.s.reg.ForStorage(storageName)
			for _, o := range c.s.store.Select(storageName+"/"+ns.Name+"/", func(*storage.Object) bool { return true }) {
				remaining++
				obj, err := c.s.store.Decode(o)
				if err != nil {
					continue
				}
				m := obj.(metav1.Object)
				if m.GetDeletionTimestamp() != nil {
					continue
				}
				err = c.client.CoreV1().RESTClient().Delete().AbsPath(apiPath(res.Group, res.Version)).
					Namespace(ns.Name).Resource(res.Name).Name(m.GetName()).Do(ctx).Error()
				if err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("delete %s %s/%s: %w", res.Name, ns.Name, m.GetName(), err)
				}
			}
		}
		if remaining > 0 || len(ns.Spec.Finalizers) == 0 {
			continue
		}
		ns.Spec.Finalizers = nil
		if _, err := c.client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("finalize namespace %s: %w", ns.Name, err)
		}
	}
	return nil
}

func apiPath(group, version string) string {
	if group == "" {
		return "/api/" + version
	}
	return "/apis/" + group + "/" + version
}

// schedule binds unbound pods to a node that fits, or says why none does.
func (c *controller) schedule(ctx context.Context, nodes map[string]*corev1.Node) error {
	pending := c.s.store.Select("pods/", func(o *storage.Object) bool {
		return o.Fields["spec.nodeName"] == "" && o.Fields["spec.schedulerName"] == corev1.DefaultSchedulerName
	})
	if len(pending) == 0 {
		return nil
	}
	nodeList := make([]*corev1.Node, 0, len(nodes))
	for _, n := range nodes {
		nodeList = append(nodeList, n)
	}
	var devices *placement.Devices // read once a pod with claims needs it
	var volState *storageState     // read once a pod with volume claims needs it
	bound := map[string][]*corev1.Pod{}
	for _, p := range decodeAll[corev1.Pod](c.s, c.s.store.Select("pods/", func(o *storage.Object) bool {
		return o.Fields["spec.nodeName"] != ""
	})) {
		bound[p.Spec.NodeName] = append(bound[p.Spec.NodeName], p)
	}
	for _, pod := range decodeAll[corev1.Pod](c.s, pending) {
		if pod.DeletionTimestamp != nil || len(pod.Spec.SchedulingGates) > 0 {
			continue
		}
		var volumes *volumePlan
		var volumeFilter func(*corev1.Node) string
		if len(podfacts.References(pod).Claims) > 0 {
			if volState == nil {
				volState = c.storage()
			}
			var msg string
			if volumes, msg = volState.planVolumes(pod); msg != "" {
				if err := c.markUnschedulable(ctx, pod, placement.PreFilterMessage(len(nodeList), msg)); err != nil {
					return err
				}
				continue
			}
			volumeFilter = volumes.filter
		}
		node, msg := "", ""
		var plan *placement.ClaimPlan
		if len(pod.Spec.ResourceClaims) == 0 {
			node, msg = placement.ChooseWith(pod, nodeList, bound, volumeFilter)
		} else {
			if devices == nil {
				devices = c.devices()
			}
			var wait bool
			node, msg, plan, wait = c.chooseWithClaims(ctx, devices, pod, nodeList, bound, volumeFilter)
			if wait {
				continue
			}
		}
		if node == "" {
			if err := c.markUnschedulable(ctx, pod, msg); err != nil {
				return err
			}
			continue
		}
		if b := volumes.bindings(node); b != nil {
			// The claims are bound first; the pod waits for them in later passes.
			if err := c.preBindVolumes(ctx, volState, b, node); err != nil {
				return err
			}
			continue
		}
		if plan != nil {
			if err := c.reserveClaims(ctx, devices, plan, pod, node); err != nil {
				if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
					continue // a claim changed meanwhile: the next pass looks again
				}
				return err
			}
		}
		err := c.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("bind pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if err == nil {
			pod.Spec.NodeName = node
			bound[node] = append(bound[node], pod)
		}
	}
	return nil
}

func (c *controller) markUnschedulable(ctx context.Context, pod *corev1.Pod, msg string) error {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Message == msg {
			return nil
		}
	}
	rest.SetPodCondition(&pod.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: msg,
		LastTransitionTime: metav1.NewTime(c.s.cfg.Clock.Now().Truncate(time.Second))})
	_, err := c.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("update status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// collectPods removes terminating pods whose node no longer exists, as
// upstream's pod GC does: no kubelet will confirm their deletion.
func (c *controller) collectPods(ctx context.Context, nodes map[string]*corev1.Node) error {
	orphans := c.s.store.Select("pods/", func(o *storage.Object) bool {
		n := o.Fields["spec.nodeName"]
		return n != "" && nodes[n] == nil && bytes.Contains(o.Raw, deletionTimestampJSON)
	})
	for _, pod := range decodeAll[corev1.Pod](c.s, orphans) {
		if pod.DeletionTimestamp == nil {
			continue
		}
		err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete orphaned pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return nil
}

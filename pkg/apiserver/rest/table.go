package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
)

var tableGV = metav1.SchemeGroupVersion

type column struct {
	name, typ string
	priority  int32
}

var (
	colName = column{name: "Name", typ: "string"}
	colAge  = column{name: "Age", typ: "string"}
)

// table renders objects as the Table kubectl get asks for. Column
// definitions are left out when headers is false (watch events after the
// first). Rows carry the objects' metadata, the whole objects, or nothing, as
// the includeObject parameter says.
func (q *req) table(objs []runtime.Object, rv, cont string, headers bool) (*metav1.Table, error) {
	include := metav1.IncludeObjectPolicy(q.r.URL.Query().Get("includeObject"))
	switch include {
	case "":
		include = metav1.IncludeMetadata
	case metav1.IncludeMetadata, metav1.IncludeObject, metav1.IncludeNone:
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("includeObject must be one of None, Metadata, Object, not %q", include))
	}
	now := q.h.opts.Clock.Now()
	cols, cells := tableColumns(q.res)
	t := &metav1.Table{ListMeta: metav1.ListMeta{ResourceVersion: rv, Continue: cont}}
	for _, c := range cols {
		if !headers {
			break
		}
		t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{
			Name: c.name, Type: c.typ, Priority: c.priority, Format: map[bool]string{true: "name"}[c == colName]})
	}
	for _, obj := range objs {
		acc, err := meta.Accessor(obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		var raw []byte
		switch include {
		case metav1.IncludeMetadata:
			pom := meta.AsPartialObjectMetadata(acc)
			pom.APIVersion, pom.Kind = "meta.k8s.io/v1", "PartialObjectMetadata"
			raw, err = json.Marshal(pom)
		case metav1.IncludeObject:
			var buf bytes.Buffer
			err = codecs.LegacyCodec(q.res.GroupVersion()).Encode(obj, &buf)
			raw = buf.Bytes()
		}
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		age := "<unknown>"
		if ts := acc.GetCreationTimestamp(); !ts.IsZero() {
			age = duration.HumanDuration(now.Sub(ts.Time))
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells(obj, acc.GetName(), age, now),
			Object: runtime.RawExtension{Raw: raw}})
	}
	return t, nil
}

type cellFunc func(obj runtime.Object, name, age string, now time.Time) []interface{}

func tableColumns(res *registry.Resource) ([]column, cellFunc) {
	switch obj := res.New().(type) {
	case *corev1.Pod:
		return []column{colName, {"Ready", "string", 0}, {"Status", "string", 0}, {"Restarts", "string", 0}, colAge,
			{"IP", "string", 1}, {"Node", "string", 1}}, podCells
	case *corev1.Node:
		return []column{colName, {"Status", "string", 0}, {"Roles", "string", 0}, colAge, {"Version", "string", 0},
			{"Internal-IP", "string", 1}, {"OS-Image", "string", 1}, {"Kernel-Version", "string", 1},
			{"Container-Runtime", "string", 1}}, nodeCells
	case *corev1.Namespace:
		return []column{colName, {"Status", "string", 0}, colAge}, func(o runtime.Object, name, age string, _ time.Time) []interface{} {
			return []interface{}{name, string(o.(*corev1.Namespace).Status.Phase), age}
		}
	case *corev1.ConfigMap:
		return []column{colName, {"Data", "integer", 0}, colAge}, func(o runtime.Object, name, age string, _ time.Time) []interface{} {
			cm := o.(*corev1.ConfigMap)
			return []interface{}{name, int64(len(cm.Data) + len(cm.BinaryData)), age}
		}
	case *corev1.Secret:
		return []column{colName, {"Type", "string", 0}, {"Data", "integer", 0}, colAge},
			func(o runtime.Object, name, age string, _ time.Time) []interface{} {
				s := o.(*corev1.Secret)
				return []interface{}{name, string(s.Type), int64(len(s.Data)), age}
			}
	case *coordinationv1.Lease:
		return []column{colName, {"Holder", "string", 0}, colAge}, func(o runtime.Object, name, age string, _ time.Time) []interface{} {
			holder := ""
			if h := o.(*coordinationv1.Lease).Spec.HolderIdentity; h != nil {
				holder = *h
			}
			return []interface{}{name, holder, age}
		}
	case *corev1.Service:
		return serviceColumns, serviceCells
	case *corev1.PersistentVolume:
		return volumeColumns, volumeCells
	case *corev1.PersistentVolumeClaim:
		return claimColumns, claimCells
	case *storagev1.StorageClass:
		return storageClassColumns, storageClassCells
	case *storagev1.CSIDriver:
		return csiDriverColumns, csiDriverCells
	case *storagev1.CSINode:
		return csiNodeColumns, csiNodeCells
	case *storagev1.VolumeAttachment:
		return volumeAttachmentColumns, volumeAttachmentCells
	case *storagev1.CSIStorageCapacity:
		return csiStorageCapacityColumns, csiStorageCapacityCells
	case *resourcev1.ResourceClaim:
		return resourceClaimColumns, resourceClaimCells
	case *resourcev1.ResourceSlice:
		return resourceSliceColumns, resourceSliceCells
	case *corev1.Event, *eventsv1.Event:
		_ = obj
		return []column{{"Last Seen", "string", 0}, {"Type", "string", 0}, {"Reason", "string", 0},
			{"Object", "string", 0}, {"Message", "string", 0}}, eventCells
	}
	return []column{colName, colAge}, func(_ runtime.Object, name, age string, _ time.Time) []interface{} {
		return []interface{}{name, age}
	}
}

func podCells(o runtime.Object, name, age string, now time.Time) []interface{} {
	pod := o.(*corev1.Pod)
	ready, restarts := 0, int32(0)
	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, cs := range pod.Status.ContainerStatuses {
		restarts += cs.RestartCount
		if cs.Ready {
			ready++
		}
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			reason = cs.State.Waiting.Reason
		case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
			reason = cs.State.Terminated.Reason
		}
	}
	if pod.DeletionTimestamp != nil {
		reason = "Terminating"
	}
	ip, node := "<none>", "<none>"
	if pod.Status.PodIP != "" {
		ip = pod.Status.PodIP
	}
	if pod.Spec.NodeName != "" {
		node = pod.Spec.NodeName
	}
	return []interface{}{name, fmt.Sprintf("%d/%d", ready, len(pod.Spec.Containers)), reason,
		fmt.Sprint(restarts), age, ip, node}
}

func nodeCells(o runtime.Object, name, age string, _ time.Time) []interface{} {
	n := o.(*corev1.Node)
	status := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			status = map[bool]string{true: "Ready", false: "NotReady"}[c.Status == corev1.ConditionTrue]
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	var roles []string
	for k := range n.Labels {
		if r, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok {
			roles = append(roles, r)
		}
	}
	role := "<none>"
	if len(roles) > 0 {
		role = strings.Join(roles, ",")
	}
	ip := "<none>"
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	ni := n.Status.NodeInfo
	return []interface{}{name, status, role, age, ni.KubeletVersion, ip, ni.OSImage, ni.KernelVersion, ni.ContainerRuntimeVersion}
}

func eventCells(o runtime.Object, _, age string, now time.Time) []interface{} {
	var ev *corev1.Event
	switch e := o.(type) {
	case *corev1.Event:
		ev = e
	case *eventsv1.Event:
		ev = &corev1.Event{Type: e.Type, Reason: e.Reason, Message: e.Note, InvolvedObject: e.Regarding,
			LastTimestamp: e.DeprecatedLastTimestamp, EventTime: e.EventTime}
	}
	last := age
	if !ev.LastTimestamp.IsZero() {
		last = duration.HumanDuration(now.Sub(ev.LastTimestamp.Time))
	} else if !ev.EventTime.IsZero() {
		last = duration.HumanDuration(now.Sub(ev.EventTime.Time))
	}
	obj := strings.ToLower(ev.InvolvedObject.Kind) + "/" + ev.InvolvedObject.Name
	return []interface{}{last, ev.Type, ev.Reason, obj, strings.TrimSpace(ev.Message)}
}

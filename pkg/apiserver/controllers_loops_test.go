package apiserver

import (
	"testing"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

func TestLoopsFor(t *testing.T) {
	t.Parallel()
	pod := func(node, scheduler, raw string) *storage.Object {
		return &storage.Object{Key: "pods/ns/p", Raw: []byte(raw),
			Fields: fields.Set{"spec.nodeName": node, "spec.schedulerName": scheduler}}
	}
	obj := func(key string) *storage.Object { return &storage.Object{Key: key, Raw: []byte("{}")} }
	for _, tc := range []struct {
		name string
		evs  []storage.Event
		want loops
	}{
		{"bound pod created", []storage.Event{{Type: watch.Added, Object: pod("n1", "default-scheduler", "{}")}}, loops{}},
		{"bound pod status", []storage.Event{{Type: watch.Modified, Object: pod("n1", "default-scheduler", `{"status":{}}`)}}, loops{}},
		{"unbound pod", []storage.Event{{Type: watch.Added, Object: pod("", "default-scheduler", "{}")}}, loops{schedule: true}},
		{"unbound pod, other scheduler", []storage.Event{{Type: watch.Added, Object: pod("", "mine", "{}")}}, loops{}},
		{"terminating pod", []storage.Event{{Type: watch.Modified,
			Object: pod("n1", "default-scheduler", `{"metadata":{"deletionTimestamp":"2025-01-01T00:00:00Z"}}`)}}, loops{collect: true}},
		{"pod removed", []storage.Event{{Type: watch.Deleted, Object: pod("n1", "default-scheduler", "{}")}}, loops{namespaces: true}},
		{"namespace", []storage.Event{{Type: watch.Added, Object: obj("namespaces//x")}}, loops{namespaces: true}},
		{"node", []storage.Event{{Type: watch.Modified, Object: obj("nodes//n1")}}, loops{schedule: true, collect: true, taints: true}},
		{"lease renewed", []storage.Event{{Type: watch.Modified, Object: obj("leases/kube-node-lease/n1")}}, loops{}},
		{"configmap removed", []storage.Event{{Type: watch.Deleted, Object: obj("configmaps/ns/c")}}, loops{namespaces: true}},
		{"configmap changed", []storage.Event{{Type: watch.Modified, Object: obj("configmaps/ns/c")}}, loops{}},
		{"unbound pod with an ephemeral volume", []storage.Event{{Type: watch.Added,
			Object: pod("", "mine", `{"spec":{"volumes":[{"name":"v","ephemeral":{}}]}}`)}}, loops{ephemeral: true}},
		{"bound pod with an ephemeral volume", []storage.Event{{Type: watch.Modified,
			Object: pod("n1", "mine", `{"spec":{"volumes":[{"name":"v","ephemeral":{}}]}}`)}}, loops{ephemeral: true, attach: true}},
		{"bound pod with a claim", []storage.Event{{Type: watch.Modified,
			Object: pod("n1", "mine", `{"spec":{"volumes":[{"name":"v","persistentVolumeClaim":{}}]}}`)}}, loops{attach: true}},
		{"pod with a claim removed", []storage.Event{{Type: watch.Deleted,
			Object: pod("n1", "mine", `{"spec":{"volumes":[{"name":"v","persistentVolumeClaim":{}}]}}`)}}, loops{namespaces: true, attach: true}},
		{"claim changed", []storage.Event{{Type: watch.Modified, Object: obj("persistentvolumeclaims/ns/c")}}, loops{volumes: true, attach: true, schedule: true}},
		{"claim removed", []storage.Event{{Type: watch.Deleted, Object: obj("persistentvolumeclaims/ns/c")}},
			loops{volumes: true, attach: true, ephemeral: true, namespaces: true, schedule: true}},
		{"volume removed", []storage.Event{{Type: watch.Deleted, Object: obj("persistentvolumes//v")}},
			loops{volumes: true, attach: true, namespaces: true, schedule: true}},
		{"storage class", []storage.Event{{Type: watch.Added, Object: obj("storageclasses//local")}}, loops{volumes: true, schedule: true}},
		{"csidriver", []storage.Event{{Type: watch.Added, Object: obj("csidrivers//d")}}, loops{attach: true}},
		{"volumeattachment", []storage.Event{{Type: watch.Deleted, Object: obj("volumeattachments//a")}}, loops{attach: true}},
		{"csinode", []storage.Event{{Type: watch.Modified, Object: obj("csinodes//n1")}}, loops{}},
		{"node added", []storage.Event{{Type: watch.Added, Object: obj("nodes//n1")}}, loops{schedule: true, collect: true, taints: true, attach: true}},
		{"node with volumes in use", []storage.Event{{Type: watch.Modified, Object: &storage.Object{Key: "nodes//n1",
			Raw: []byte(`{"status":{"volumesInUse":["kubernetes.io/csi/d^h"]}}`)}}}, loops{schedule: true, collect: true, taints: true, attach: true}},
		{"node with no volumes in use any more", []storage.Event{{Type: watch.Modified, Object: obj("nodes//n1"), Prev: &storage.Object{
			Key: "nodes//n1", Raw: []byte(`{"status":{"volumesInUse":["kubernetes.io/csi/d^h"]}}`)}}}, loops{schedule: true, collect: true, taints: true, attach: true}},
		{"unbound pod with resource claims", []storage.Event{{Type: watch.Added,
			Object: pod("", "default-scheduler", `{"spec":{"resourceClaims":[{"name":"gpu"}]}}`)}}, loops{schedule: true, claims: true}},
		{"bound pod with resource claims", []storage.Event{{Type: watch.Modified,
			Object: pod("n1", "default-scheduler", `{"spec":{"resourceClaims":[{"name":"gpu"}]}}`)}}, loops{claims: true}},
		{"pod with resource claims removed", []storage.Event{{Type: watch.Deleted,
			Object: pod("n1", "default-scheduler", `{"spec":{"resourceClaims":[{"name":"gpu"}]}}`)}}, loops{claims: true, namespaces: true}},
		{"resource claim", []storage.Event{{Type: watch.Modified, Object: obj("resourceclaims/ns/c")}}, loops{claims: true, schedule: true}},
		{"resource claim removed", []storage.Event{{Type: watch.Deleted, Object: obj("resourceclaims/ns/c")}},
			loops{claims: true, schedule: true, namespaces: true}},
		{"resource claim template", []storage.Event{{Type: watch.Added, Object: obj("resourceclaimtemplates/ns/t")}}, loops{claims: true, schedule: true}},
		{"resource slice", []storage.Event{{Type: watch.Added, Object: obj("resourceslices//s")}}, loops{schedule: true}},
		{"device class", []storage.Event{{Type: watch.Modified, Object: obj("deviceclasses//c")}}, loops{schedule: true}},
	} {
		if got := loopsFor(tc.evs); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

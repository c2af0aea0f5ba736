package main

import (
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/config"
	"github.com/nodeagent/kubelet/pkg/kubeclient"
	"github.com/nodeagent/kubelet/pkg/offline"
)

// podsyncOffline is what the pod sync gets for offline autonomy: the checkpoint of its pods and which of them
// run offline (nothing when it is off), and the service environment through the checkpoint.
type podsyncOffline struct {
	checkpoint config.PodCheckpoint
	offline    config.Offline
	serviceEnv func(*v1.Pod) (map[string]string, error)
}

// offlinePodSync is podsyncOffline for checkpoint (nil: offline autonomy off) and the Services' env.
func offlinePodSync(o *options, checkpoint *offline.Store, env func(*v1.Pod) (map[string]string, error)) podsyncOffline {
	if checkpoint == nil {
		return podsyncOffline{serviceEnv: env}
	}
	mode, _ := offline.ParseMode(o.offlineAutonomy) // validated with the options
	return podsyncOffline{checkpoint: checkpoint, serviceEnv: offline.ServiceEnv(env, checkpoint),
		offline: config.Offline{Grace: o.offlineGrace, Runs: func(pod *v1.Pod) bool { return offline.RunsOffline(pod, mode) }}}
}

// offlineCheckpoint opens the node's checkpoint (<root dir>/checkpoint) and returns the pods client reading
// through it, when --offline-autonomy is not none and the node has an API server. With none, any
// checkpoint an earlier run left (secrets among it) is removed, and the client is c.
func offlineCheckpoint(o *options, c kubeclient.Interface) (kubeclient.Interface, *offline.Store, error) {
	if o.offlineAutonomy == string(offline.None) || c == nil {
		return c, nil, offline.Remove(o.rootDir)
	}
	s, err := offline.Open(o.rootDir)
	if err != nil {
		return nil, nil, err
	}
	return offline.Client(c, s), s, nil
}

// openCheckpoint opens the node's checkpoint (offlineCheckpoint) before the pieces that read through it.
func (p *nodeParts) openCheckpoint() error {
	var err error
	p.podsClient, p.checkpoint, err = offlineCheckpoint(p.o, p.d.clients.pods)
	return err
}

// nodeResource is where the checkpoint keeps the node's own Node.
const nodeResource = "nodes"

// lastKnownNode reads the node's Node from the checkpoint: nil without one.
func lastKnownNode(s *offline.Store, name string) *v1.Node {
	if s == nil {
		return nil
	}
	var n v1.Node
	if ok, err := s.Object(nodeResource, "", name, &n); !ok || err != nil {
		if err != nil {
			klog.Background().Error(err, "The checkpointed Node cannot be read: its labels are not used")
		}
		return nil
	}
	return &n
}

// keepNode records the Node in the checkpoint when its labels change (what admission reads of it offline).
func keepNode(s *offline.Store) func(*v1.Node) {
	if s == nil {
		return nil
	}
	return func(n *v1.Node) {
		labels, _ := json.Marshal(n.Labels)
		kept := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, Labels: n.Labels}}
		if err := s.PutObject(nodeResource, "", n.Name, string(labels), kept); err != nil {
			klog.Background().Error(err, "Cannot checkpoint the Node")
		}
	}
}

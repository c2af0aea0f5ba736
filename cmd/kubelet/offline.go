package main

import (
	v1 "k8s.io/api/core/v1"

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

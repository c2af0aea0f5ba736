package debugpage

import "time"

// Page is everything the debug page shows.
type Page struct {
	Node      Node      `json:"node"`
	Pods      []Pod     `json:"pods"`
	Generated time.Time `json:"generated"`
}

// Offline is what the node runs from its checkpoint: since when, and which pods (namespace/name).
type Offline struct {
	Since time.Time `json:"since"`
	Pods  []string  `json:"pods"`
}

// Node is the node's own health.
type Node struct {
	Name string `json:"name"`
	// Ready and ReadyMessage are the Ready condition the node agent computes now; Failures its failing checks.
	Ready        bool     `json:"ready"`
	ReadyMessage string   `json:"readyMessage,omitempty"`
	Failures     []string `json:"failures,omitempty"`
	// LastRelist is when the PLEG's last full relist began, RelistTook how long it took.
	LastRelist time.Time     `json:"lastRelist"`
	RelistTook time.Duration `json:"relistTook"`
	// Stuck are the pods whose runtime inspection has not returned.
	Stuck []Stuck `json:"stuck,omitempty"`
	// RuntimeReady and NetworkReady are the runtime's conditions, with the reason when false.
	RuntimeReady   bool   `json:"runtimeReady"`
	RuntimeMessage string `json:"runtimeMessage,omitempty"`
	NetworkReady   bool   `json:"networkReady"`
	NetworkMessage string `json:"networkMessage,omitempty"`
	// APIReachable says whether the last call to the API server worked; LastLease is the last Lease renewal.
	APIReachable bool      `json:"apiReachable"`
	LastLease    time.Time `json:"lastLease"`
	CgroupMode   string    `json:"cgroupMode"`
	CgroupDriver string    `json:"cgroupDriver"`
	// Offline is set while the node runs pods from its checkpoint, its API server away since its start.
	Offline *Offline `json:"offline,omitempty"`
	// Devices are the device plugins' resources.
	Devices []DeviceResource `json:"devices,omitempty"`
	// Plugins are the registrations through the plugin registration directory (CSI drivers), with the
	// error of a failed one.
	Plugins []Plugin `json:"plugins,omitempty"`
}

// Plugin is one registration socket: the plugin's type, name and endpoint, or why it was refused.
type Plugin struct {
	Socket   string `json:"socket"`
	Type     string `json:"type,omitempty"`
	Name     string `json:"name,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	Error    string `json:"error,omitempty"`
}

// DeviceResource is a device plugin's resource: its plugin (the socket name; empty once the plugin went
// away, PluginGone ago) and its devices.
type DeviceResource struct {
	Name       string        `json:"name"`
	Plugin     string        `json:"plugin,omitempty"`
	PluginGone time.Duration `json:"pluginGone,omitempty"`
	Devices    int           `json:"devices"`
	Healthy    int           `json:"healthy"`
	Held       int           `json:"held"`
}

// Stuck is a pod whose runtime call has not returned.
type Stuck struct {
	Pod   string        `json:"pod"`
	Call  string        `json:"call"`
	Since time.Duration `json:"since"`
}

// Pod is one pod as the kubelet knows it.
type Pod struct {
	Namespace     string      `json:"namespace"`
	Name          string      `json:"name"`
	UID           string      `json:"uid"`
	State         string      `json:"state"` // the worker's: Syncing, Terminating, Terminated, Pending, Rejected
	Phase         string      `json:"phase,omitempty"`
	QOS           string      `json:"qos,omitempty"`
	Ready         bool        `json:"ready"`
	Conditions    []Condition `json:"conditions,omitempty"`
	Syncs         int         `json:"syncs"`
	LastSyncError string      `json:"lastSyncError,omitempty"`
	Backoffs      []Backoff   `json:"backoffs,omitempty"`
	Timeline      []Step      `json:"timeline,omitempty"`
	Probes        []Probe     `json:"probes,omitempty"`
	WhyNotReady   string      `json:"whyNotReady,omitempty"`
	// WaitingFor names what the pod's start waits for outside the kubelet: a ResourceClaim, its driver and
	// the driver's last error.
	WaitingFor string        `json:"waitingFor,omitempty"`
	Age        time.Duration `json:"age"`
}

// Condition is a pod condition.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Backoff is a container's or an image's back-off, until when.
type Backoff struct {
	What   string    `json:"what"` // "container app" or "image busybox:1.35"
	Reason string    `json:"reason"`
	Until  time.Time `json:"until"`
}

// Step is one step of a pod's start: when it ended, how long it took, and what it gave.
type Step struct {
	Name    string        `json:"name"`
	At      time.Time     `json:"at"`
	Took    time.Duration `json:"took"`
	Detail  string        `json:"detail,omitempty"`
	Slowest bool          `json:"slowest,omitempty"`
}

// Probe is a probe's last result.
type Probe struct {
	Container string    `json:"container"`
	Type      string    `json:"type"`
	Result    string    `json:"result"`
	Output    string    `json:"output,omitempty"`
	At        time.Time `json:"at"`
}

// MarkSlowest marks the step that took longest.
func MarkSlowest(steps []Step) {
	k := -1
	for i, s := range steps {
		steps[i].Slowest = false
		if k < 0 || s.Took > steps[k].Took {
			k = i
		}
	}
	if k >= 0 && steps[k].Took > 0 {
		steps[k].Slowest = true
	}
}

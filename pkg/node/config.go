package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/kubeclient"
	"github.com/nodeagent/kubelet/pkg/nodedefaults"
)

// Upstream's defaults.
const (
	DefaultStatusUpdateFrequency = 10 * time.Second
	DefaultStatusReportFrequency = 5 * time.Minute
	DefaultLeaseDuration         = 40 * time.Second
	// DefaultKubeletVersion is reported in nodeInfo when Config.KubeletVersion is empty: the Kubernetes API
	// level this kubelet implements.
	DefaultKubeletVersion = "v1.35.4"
	// LeaseNamespace holds the nodes' heartbeat Leases.
	LeaseNamespace = "kube-node-lease"
	// MaxImages is how many images the status lists at most (upstream's nodeStatusMaxImages).
	MaxImages = 50
	// maxNamesPerImage is how many names of one image the status lists (upstream's value).
	maxNamesPerImage = 5
	// apiTimeout bounds one API call, so that a silent network cannot stall a loop.
	apiTimeout = 10 * time.Second
	// runtimeTimeout bounds one call to the container runtime.
	runtimeTimeout = 5 * time.Second
)

// RuntimeService is what the agent asks the container runtime: its name and version for nodeInfo, and its
// status (RuntimeReady, NetworkReady) for the Ready condition. cri.RuntimeService implements it.
type RuntimeService interface {
	Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error)
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)
}

// ImageLister lists the images present on the node. cri.ImageManagerService implements it.
type ImageLister interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
}

// Check is one health input of the Ready condition. Func returns nil when healthy; otherwise its error text
// is written, as it is, into the Ready condition's message (so it should read like upstream's, e.g. "PLEG is
// not healthy: pleg was last seen active 3m5s ago; threshold is 3m0s"). Func must be fast and safe for
// concurrent use. The runtime and network checks are built in when Config.Runtime is set.
type Check struct {
	Name string
	Func func() error
}

// Config configures an Agent. Name and Client are required.
type Config struct {
	// Name is the Node's name (--hostname-override or the host name, lower-cased).
	Name string
	// Hostname is the node's Hostname address and kubernetes.io/hostname label; Name when empty.
	Hostname string
	// Client talks to the API server as this node.
	Client kubeclient.Interface
	// Runtime gives the runtime's version and status; optional.
	Runtime RuntimeService
	// Images lists the images for the status; optional.
	Images ImageLister
	// PodCIDR, when set, is given the Node's pod CIDRs (spec.podCIDRs, comma-separated, as upstream's kubelet
	// passes them to the runtime's UpdateRuntimeConfig) whenever they change; an error is retried on the
	// next status sync.
	PodCIDR func(ctx context.Context, cidrs string) error
	// Clock is the time source; the real clock when nil.
	Clock clock.WithTicker
	// NodeIP is --node-ip: one address or a dual-stack pair, comma-separated; "0.0.0.0" or "::" only choose
	// the preferred family. Empty: the addresses of the default-route interface, found through netlink.
	NodeIP string
	// Labels are --node-labels, set when the Node is created.
	Labels map[string]string
	// Taints are --register-with-taints, set when the Node is created.
	Taints []v1.Taint
	// KubeletPort is the kubelet endpoint's port, reported in daemonEndpoints.
	KubeletPort int32
	// RootDir is the kubelet's root directory; its filesystem is the node's ephemeral storage (nodefs).
	RootDir string
	// MaxPods is the pods capacity; nodedefaults.MaxPods when 0.
	MaxPods int
	// Reserved is kube-reserved plus system-reserved, taken off allocatable.
	Reserved v1.ResourceList
	// Eviction holds the hard eviction thresholds that allocatable takes off capacity; upstream's defaults
	// when zero.
	Eviction Thresholds
	// Health are further inputs of the Ready condition (PLEG, sync loop, ...).
	Health []Check
	// KubeletVersion is reported in nodeInfo; DefaultKubeletVersion when empty.
	KubeletVersion string
	// NoRegister leaves creating the Node to someone else (--register-node=false): the agent waits for it.
	NoRegister bool
	// StatusUpdateFrequency is how often the status is computed; 10s when 0.
	StatusUpdateFrequency time.Duration
	// StatusReportFrequency is how often an unchanged status is posted; 5m when 0.
	StatusReportFrequency time.Duration
	// LeaseDuration is the Lease's duration; 40s when 0. It is renewed every quarter of it.
	LeaseDuration time.Duration
	// Recorder records the node's events (NodeReady, NodeNotReady, pressure changes); optional.
	Recorder record.EventRecorder
	// Host holds the machine's facts; read from this machine (ReadHost) when nil.
	Host *Host
	// Pressure gives the pressure conditions to report (the eviction manager's: memory, disk, PID); nil
	// reports none.
	Pressure func() (memory, disk, pid bool)
	// Devices, when set, gives the resources device plugins offer (pkg/devicemanager): added to capacity
	// and allocatable. Call Resync when they change.
	Devices func() (capacity, allocatable v1.ResourceList)
	// VolumesInUse, when set, lists the attachable volumes mounted on the node, reported in
	// status.volumesInUse so that the attach/detach controller does not detach them under the node.
	VolumesInUse func() []v1.UniqueVolumeName
	// LastKnown is the Node as the API showed it before this start (the node's checkpoint): until the API
	// shows it again, Node answers with its labels (beside Labels, which win), so that a node started without
	// its API server admits pods by the labels others gave it. Registration never sends them.
	LastKnown *v1.Node
	// Seen, when set, is given the Node each time the API shows it changed (to checkpoint it).
	Seen func(*v1.Node)
}

func (c *Config) setDefaults() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("node name is required"))
	}
	if c.Name != strings.ToLower(c.Name) {
		errs = append(errs, fmt.Errorf("node name %q must be lower case", c.Name))
	}
	if c.Client == nil {
		errs = append(errs, errors.New("API client is required"))
	}
	if c.KubeletPort < 0 || c.KubeletPort > 65535 {
		errs = append(errs, fmt.Errorf("kubelet port %d out of range", c.KubeletPort))
	}
	if c.MaxPods < 0 {
		errs = append(errs, fmt.Errorf("max pods %d must not be negative", c.MaxPods))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if c.Hostname == "" {
		c.Hostname = c.Name
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.RootDir == "" {
		c.RootDir = "/"
	}
	if c.MaxPods == 0 {
		c.MaxPods = nodedefaults.MaxPods
	}
	if c.KubeletVersion == "" {
		c.KubeletVersion = DefaultKubeletVersion
	}
	if c.StatusUpdateFrequency <= 0 {
		c.StatusUpdateFrequency = DefaultStatusUpdateFrequency
	}
	if c.StatusReportFrequency <= 0 {
		c.StatusReportFrequency = DefaultStatusReportFrequency
	}
	if c.LeaseDuration <= 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	c.Eviction = c.Eviction.withDefaults()
	return nil
}

package podresources

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/nodeagent/kubelet/pkg/devicemanager/checkpoint"
)

// Upstream's limits of the pod-resources API: 100 calls a second, bursts of 10.
const (
	qps   = 100
	burst = 10
)

// Devices is what the device manager tells the API.
type Devices interface {
	// ContainerDevices returns the device IDs a container holds, by resource and by the NUMA node they are
	// on (checkpoint.NoNUMA when their plugin gave none).
	ContainerDevices(pod types.UID, container string) map[string]checkpoint.DevicesPerNUMA
	// AllocatableDevices returns the healthy devices of every resource, by resource and ID, with the NUMA
	// nodes each is on.
	AllocatableDevices() map[string]map[string][]int64
}

// DynamicResources is what dynamic resource allocation tells the API: the prepared claims' devices a
// container uses.
type DynamicResources interface {
	PodResources(pod *v1.Pod, container string) []*podresourcesapi.DynamicResource
}

// Config is what a Server needs. Socket, Pods and Devices are required.
type Config struct {
	Socket string
	// Pods returns the pods the kubelet runs.
	Pods    func() []*v1.Pod
	Devices Devices
	// DRA, when set, adds the devices of each container's ResourceClaims.
	DRA DynamicResources
}

// Server serves the API.
type Server struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	cfg Config
}

// New returns a server; Run serves it.
func New(cfg Config) (*Server, error) {
	if cfg.Socket == "" || cfg.Pods == nil || cfg.Devices == nil {
		return nil, errors.New("podresources: socket, pods and devices are required")
	}
	return &Server{cfg: cfg}, nil
}

// Run serves the socket until ctx ends. A socket left by an earlier kubelet is replaced.
func (s *Server) Run(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(s.cfg.Socket), 0o750); err != nil {
		return fmt.Errorf("podresources: %w", err)
	}
	if err := os.Remove(s.cfg.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("podresources: %w", err)
	}
	l, err := net.Listen("unix", s.cfg.Socket)
	if err != nil {
		return fmt.Errorf("podresources: %w", err)
	}
	if err := os.Chmod(s.cfg.Socket, 0o600); err != nil {
		l.Close()
		return fmt.Errorf("podresources: %w", err)
	}
	limiter := rate.NewLimiter(qps, burst)
	g := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !limiter.Allow() {
			return nil, status.Error(codes.ResourceExhausted, "rejected by rate limit")
		}
		return h(ctx, req)
	}))
	podresourcesapi.RegisterPodResourcesListerServer(g, s)
	go func() {
		<-ctx.Done()
		g.Stop()
	}()
	klog.FromContext(ctx).Info("Serving the pod-resources API", "socket", s.cfg.Socket)
	if err := g.Serve(l); err != nil && ctx.Err() == nil {
		return fmt.Errorf("podresources: %w", err)
	}
	return nil
}

// List answers the active pods' containers and their devices.
func (s *Server) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	pods := s.cfg.Pods()
	out := &podresourcesapi.ListPodResourcesResponse{PodResources: make([]*podresourcesapi.PodResources, 0, len(pods))}
	for _, p := range pods {
		out.PodResources = append(out.PodResources, s.podResources(p))
	}
	return out, nil
}

// Get answers one active pod; a pod the kubelet does not run is NotFound.
func (s *Server) Get(_ context.Context, req *podresourcesapi.GetPodResourcesRequest) (*podresourcesapi.GetPodResourcesResponse, error) {
	for _, p := range s.cfg.Pods() {
		if p.Name == req.PodName && p.Namespace == req.PodNamespace {
			return &podresourcesapi.GetPodResourcesResponse{PodResources: s.podResources(p)}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "pod %s in namespace %s not found", req.PodName, req.PodNamespace)
}

// GetAllocatableResources answers every device the node offers.
func (s *Server) GetAllocatableResources(context.Context, *podresourcesapi.AllocatableResourcesRequest) (*podresourcesapi.AllocatableResourcesResponse, error) {
	return &podresourcesapi.AllocatableResourcesResponse{Devices: allocatableDevices(s.cfg.Devices.AllocatableDevices())}, nil
}

// podResources lists a pod's app containers and its sidecars (restartable init containers), as upstream.
func (s *Server) podResources(p *v1.Pod) *podresourcesapi.PodResources {
	out := &podresourcesapi.PodResources{Name: p.Name, Namespace: p.Namespace}
	add := func(c *v1.Container) {
		cr := &podresourcesapi.ContainerResources{
			Name: c.Name, Devices: containerDevices(s.cfg.Devices.ContainerDevices(p.UID, c.Name)),
		}
		if s.cfg.DRA != nil {
			cr.DynamicResources = s.cfg.DRA.PodResources(p, c.Name)
		}
		out.Containers = append(out.Containers, cr)
	}
	for i := range p.Spec.InitContainers {
		if c := &p.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for i := range p.Spec.Containers {
		add(&p.Spec.Containers[i])
	}
	return out
}

// containerDevices is one entry per resource and NUMA node, as upstream answers a container's devices: the
// node in its topology, none for devices their plugin placed on no node. Entries and IDs are sorted.
func containerDevices(byResource map[string]checkpoint.DevicesPerNUMA) []*podresourcesapi.ContainerDevices {
	var out []*podresourcesapi.ContainerDevices
	for _, name := range sortedKeys(byResource) {
		perNUMA := byResource[name]
		for _, node := range sortedKeys(perNUMA) {
			ids := append([]string(nil), perNUMA[node]...)
			sort.Strings(ids)
			out = append(out, &podresourcesapi.ContainerDevices{ResourceName: name, DeviceIds: ids, Topology: topology(node)})
		}
	}
	return out
}

// allocatableDevices is one entry per device and NUMA node it is on (one without topology for a device on
// none), as upstream answers GetAllocatableResources. Entries are sorted.
func allocatableDevices(byResource map[string]map[string][]int64) []*podresourcesapi.ContainerDevices {
	var out []*podresourcesapi.ContainerDevices
	for _, name := range sortedKeys(byResource) {
		for _, id := range sortedKeys(byResource[name]) {
			nodes := byResource[name][id]
			if len(nodes) == 0 {
				nodes = []int64{checkpoint.NoNUMA}
			}
			for _, node := range nodes {
				out = append(out, &podresourcesapi.ContainerDevices{ResourceName: name, DeviceIds: []string{id}, Topology: topology(node)})
			}
		}
	}
	return out
}

// topology is a NUMA node as the API names it; nil for checkpoint.NoNUMA.
func topology(node int64) *podresourcesapi.TopologyInfo {
	if node == checkpoint.NoNUMA {
		return nil
	}
	return &podresourcesapi.TopologyInfo{Nodes: []*podresourcesapi.NUMANode{{ID: node}}}
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

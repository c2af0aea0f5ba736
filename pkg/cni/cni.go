package cni

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// ErrNoNetwork is returned while the configuration directory holds no usable network configuration.
var ErrNoNetwork = errors.New("cni: no network configuration")

// PortMapping is one hostPort published by a pod, in the shape the portmap plugin's capability expects.
type PortMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// Pod identifies the pod a network attachment is for; the values reach the plugins as CNI_ARGS.
type Pod struct {
	Name      string
	Namespace string
	UID       string
	Ports     []PortMapping
}

// Config configures a Manager.
type Config struct {
	ConfDir  string   // directory of .conflist/.conf files; the first in lexical order is used
	BinDirs  []string // plugin directories
	CacheDir string   // libcni's result cache; "" means libcni's default
	// Exec runs plugins; nil means the real exec. Tests record plugin calls through it.
	Exec invoke.Exec
	// Iptables runs iptables for the node's pod masquerade; nil means the host's iptables and ip6tables.
	Iptables Iptables
}

// Manager attaches pod network namespaces to the node's pod network. It is safe for concurrent use.
type Manager struct {
	cfg Config
	cni *libcni.CNIConfig

	mu      sync.Mutex
	net     *libcni.NetworkConfigList
	masq    []*net.IPNet // subnets the node masquerades for net's plugins (masquerade.go)
	netFile string       // the file net was read from, and its modification time: a change reloads it
	netTime time.Time

	masqMu      sync.Mutex
	masqChecked time.Time // when the masquerade rules were last found or made right
}

// masqRecheck is how often a Setup checks that the masquerade rules are still in place.
const masqRecheck = time.Minute

// New returns a Manager; the configuration is read lazily, so a network configured after start is picked up.
func New(cfg Config) *Manager {
	if cfg.Iptables == nil && hasHostIptables() {
		cfg.Iptables = hostIptables{} // without iptables, the plugins masquerade as configured
	}
	return &Manager{cfg: cfg, cni: libcni.NewCNIConfigWithCacheDir(cfg.BinDirs, cfg.CacheDir, cfg.Exec)}
}

// Status returns nil when a network configuration is loaded and its plugins are found.
func (m *Manager) Status() error {
	_, _, err := m.network()
	return err
}

// network returns the network pods attach to, with ipMasq taken over by the node, and the subnets the node
// masquerades for it.
func (m *Manager) network() (*libcni.NetworkConfigList, []*net.IPNet, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.net != nil {
		// The file still there and unchanged (one stat): the network as read. Removed or edited, it is
		// read again, as containerd's CRI plugin follows its configuration directory.
		if fi, err := os.Stat(m.netFile); err == nil && fi.ModTime().Equal(m.netTime) {
			return m.net, m.masq, nil
		}
		m.net, m.masq = nil, nil
	}
	files, err := libcni.ConfFiles(m.cfg.ConfDir, []string{".conflist", ".conf", ".json"})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: read %s: %v", ErrNoNetwork, m.cfg.ConfDir, err)
	}
	sort.Strings(files)
	var lastErr error
	for _, f := range files {
		list, err := loadFile(f)
		if err != nil {
			lastErr = err
			continue
		}
		m.net, m.masq = list, nil
		if fi, err := os.Stat(f); err == nil {
			m.netFile, m.netTime = f, fi.ModTime()
		}
		if m.cfg.Iptables != nil {
			if delegated, subnets, err := delegateMasquerade(list); err == nil {
				m.net, m.masq = delegated, subnets
			}
		}
		return m.net, m.masq, nil
	}
	if lastErr != nil {
		return nil, nil, fmt.Errorf("%w in %s: %v", ErrNoNetwork, m.cfg.ConfDir, lastErr)
	}
	return nil, nil, fmt.Errorf("%w in %s", ErrNoNetwork, m.cfg.ConfDir)
}

func loadFile(path string) (*libcni.NetworkConfigList, error) {
	if list, err := libcni.ConfListFromFile(path); err == nil {
		return list, nil
	}
	conf, err := libcni.ConfFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return libcni.ConfListFromConf(conf)
}

func runtimeConf(id, netnsPath string, pod Pod) *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{
		ContainerID: id,
		NetNS:       netnsPath,
		IfName:      "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", pod.Namespace},
			{"K8S_POD_NAME", pod.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", id},
			{"K8S_POD_UID", pod.UID},
		},
	}
	if len(pod.Ports) > 0 {
		rt.CapabilityArgs = map[string]interface{}{"portMappings": pod.Ports}
	}
	return rt
}

// forPod returns the network list to run for pod: without the plugins that only serve port mappings when
// the pod publishes none. Such a plugin (portmap) does nothing then, yet its exec and, on DEL, its iptables
// clean-up cost a pod start or stop tens of milliseconds.
func forPod(list *libcni.NetworkConfigList, pod Pod) *libcni.NetworkConfigList {
	if len(pod.Ports) > 0 {
		return list
	}
	var kept []*libcni.PluginConfig
	for _, p := range list.Plugins {
		if onlyPortMappings(p.Network.Capabilities) {
			continue
		}
		kept = append(kept, p)
	}
	if len(kept) == len(list.Plugins) || len(kept) == 0 {
		return list
	}
	out := *list
	out.Plugins = kept
	return &out
}

func onlyPortMappings(caps map[string]bool) bool {
	if !caps["portMappings"] {
		return false
	}
	for c, on := range caps {
		if on && c != "portMappings" {
			return false
		}
	}
	return true
}

// Setup attaches the namespace at netnsPath to the pod network and returns the pod's IPs, IPv4 first.
func (m *Manager) Setup(ctx context.Context, id, netnsPath string, pod Pod) ([]net.IP, error) {
	list, masq, err := m.network()
	if err != nil {
		return nil, err
	}
	if err := m.ensureMasquerade(ctx, masq); err != nil {
		return nil, err
	}
	list = forPod(list, pod)
	res, err := m.cni.AddNetworkList(ctx, list, runtimeConf(id, netnsPath, pod))
	if err != nil {
		return nil, fmt.Errorf("cni add %q: %w", list.Name, err)
	}
	return resultIPs(res)
}

// Teardown detaches the sandbox from the pod network and releases its IPs. It is idempotent: the plugins
// treat a missing namespace or attachment as done.
func (m *Manager) Teardown(ctx context.Context, id, netnsPath string, pod Pod) error {
	list, _, err := m.network()
	if err != nil {
		return err
	}
	rt := runtimeConf(id, netnsPath, pod)
	added := m.addedWith(list, rt)
	err = m.cni.DelNetworkList(ctx, forPod(added, pod), rt)
	if err != nil && added != list {
		// The configuration the ADD ran with may name a plugin since removed from the host: the current one
		// still releases what it can, so that the pod can be stopped.
		if err2 := m.cni.DelNetworkList(ctx, forPod(list, pod), rt); err2 == nil {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("cni del %q: %w", list.Name, err)
	}
	return nil
}

// addedWith returns the configuration of list that the attachment rt names was added with, from libcni's
// cache, or list itself when the cache has none: a DEL undoes what its ADD did, whatever the configuration
// says now.
func (m *Manager) addedWith(list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) *libcni.NetworkConfigList {
	b, _, err := m.cni.GetNetworkListCachedConfig(list, rt)
	if err != nil || len(b) == 0 {
		return list
	}
	cached, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		return list
	}
	return withFilePlugins(cached, list)
}

// ensureMasquerade checks, at most every masqRecheck, that the node masquerades subnets.
func (m *Manager) ensureMasquerade(ctx context.Context, subnets []*net.IPNet) error {
	if len(subnets) == 0 {
		return nil
	}
	m.masqMu.Lock()
	defer m.masqMu.Unlock()
	if !m.masqChecked.IsZero() && time.Since(m.masqChecked) < masqRecheck {
		return nil
	}
	if err := ensureMasquerade(ctx, m.cfg.Iptables, subnets); err != nil {
		return err
	}
	m.masqChecked = time.Now()
	return nil
}

func resultIPs(res cnitypes.Result) ([]net.IP, error) {
	r, err := current.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("convert cni result: %w", err)
	}
	var v4, v6 []net.IP
	for _, ip := range r.IPs {
		if ip.Address.IP.To4() != nil {
			v4 = append(v4, ip.Address.IP)
		} else {
			v6 = append(v6, ip.Address.IP)
		}
	}
	ips := append(v4, v6...)
	if len(ips) == 0 {
		return nil, errors.New("cni result carries no IP")
	}
	return ips, nil
}

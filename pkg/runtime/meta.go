package runtime

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/typeurl/v2"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// containerd labels. Immutable facts live in the metadata extension; the labels carry what changes over a
// container's life, so that a List call shows the current state without reading anything else.
const (
	labelKind       = "io.nodeagent.kind" // kindSandbox or kindContainer
	labelSandboxID  = "io.nodeagent.sandbox-id"
	labelStartedAt  = "io.nodeagent.started-at"  // unix nanoseconds
	labelFinishedAt = "io.nodeagent.finished-at" // unix nanoseconds
	labelExitCode   = "io.nodeagent.exit-code"
	labelReason     = "io.nodeagent.reason"
	labelMessage    = "io.nodeagent.message"
	labelStopped    = "io.nodeagent.stopped"    // sandbox: "true" once StopPodSandbox ran
	labelIPs        = "io.nodeagent.ips"        // sandbox: comma-separated pod IPs, IPv4 first
	labelPodUID     = "io.nodeagent.pod-uid"    // the pod's UID, carried by events so a watcher can find the pod
	labelExited     = "io.nodeagent.exited"     // sandbox: "true" once its pause process is gone
	labelIncomplete = "io.nodeagent.incomplete" // sandbox: "true" until RunPodSandbox has set it all up

	kindSandbox   = "sandbox"
	kindContainer = "container"

	extensionMeta = "io.nodeagent.meta"

	// shimGroupAnnotation makes containerd's runc v2 shim serve every container of a pod in one process.
	shimGroupAnnotation = "io.containerd.runc.v2.group"
)

// sandboxMeta is what RunPodSandbox fixed for a sandbox's whole life.
type sandboxMeta struct {
	Metadata     *runtimeapi.PodSandboxMetadata `json:"metadata"`
	Labels       map[string]string              `json:"labels,omitempty"`
	Annotations  map[string]string              `json:"annotations,omitempty"`
	Hostname     string                         `json:"hostname,omitempty"`
	LogDirectory string                         `json:"logDirectory,omitempty"`
	NetnsPath    string                         `json:"netnsPath,omitempty"`
	NetnsName    string                         `json:"netnsName,omitempty"`
	HostNetwork  bool                           `json:"hostNetwork,omitempty"`
	HostPID      bool                           `json:"hostPID,omitempty"`
	HostIPC      bool                           `json:"hostIPC,omitempty"`
	IPs          []string                       `json:"-"` // from labelIPs
	CgroupParent string                         `json:"cgroupParent,omitempty"`
	Ports        []*runtimeapi.PortMapping      `json:"ports,omitempty"`
	Handler      string                         `json:"handler,omitempty"`
	Dir          string                         `json:"dir,omitempty"` // hosts, resolv.conf, hostname, shm; see sandboxDirOf
	CreatedAt    int64                          `json:"createdAt"`
	// Userns is the pod's user namespace (mode POD with its mappings) when it has one of its own.
	Userns *runtimeapi.UserNamespace `json:"userns,omitempty"`
}

// hasShm reports whether the sandbox gives its containers a shared /dev/shm: sandboxes made before it did
// (they record no Dir) leave each container its own.
func (m *sandboxMeta) hasShm() bool { return m.Dir != "" }

// containerMeta is what CreateContainer fixed for a container's whole life.
type containerMeta struct {
	Metadata    *runtimeapi.ContainerMetadata `json:"metadata"`
	SandboxID   string                        `json:"sandboxID"`
	Labels      map[string]string             `json:"labels,omitempty"`
	Annotations map[string]string             `json:"annotations,omitempty"`
	Image       string                        `json:"image"`    // as asked
	ImageRef    string                        `json:"imageRef"` // image ID (config digest)
	LogPath     string                        `json:"logPath,omitempty"`
	Mounts      []*runtimeapi.Mount           `json:"mounts,omitempty"`
	StopSignal  string                        `json:"stopSignal,omitempty"`
	Stdin       bool                          `json:"stdin,omitempty"`
	StdinOnce   bool                          `json:"stdinOnce,omitempty"`
	TTY         bool                          `json:"tty,omitempty"`
	CgroupsPath string                        `json:"cgroupsPath,omitempty"`
	// User is the identity the container's process starts with (ContainerStatus.user); nil for containers
	// created before it was recorded.
	User      *runtimeapi.LinuxContainerUser `json:"user,omitempty"`
	CreatedAt int64                          `json:"createdAt"`
}

func init() {
	typeurl.Register(&sandboxMeta{}, "io.nodeagent", "SandboxMeta")
	typeurl.Register(&containerMeta{}, "io.nodeagent", "ContainerMeta")
}

// newID returns a random 64-hex-digit ID, as other CRI runtimes use.
func newID() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("read random: %v", err)) // the kernel's RNG does not fail
	}
	return hex.EncodeToString(b)
}

// metaCache holds decoded metadata by container ID. Metadata never changes after create, so an entry is
// valid until the record is removed (the record index drops it then); listing decodes only what is new.
type metaCache struct{ m sync.Map }

func (c *metaCache) sandbox(rec containers.Container) (*sandboxMeta, error) {
	if v, ok := c.m.Load(rec.ID); ok {
		if m, ok := v.(*sandboxMeta); ok {
			cp := *m
			cp.IPs = ipsOf(rec.Labels)
			return &cp, nil
		}
	}
	m, err := decodeSandboxMeta(rec)
	if err != nil {
		return nil, err
	}
	c.m.Store(rec.ID, m)
	cp := *m
	return &cp, nil
}

func (c *metaCache) container(rec containers.Container) (*containerMeta, error) {
	if v, ok := c.m.Load(rec.ID); ok {
		if m, ok := v.(*containerMeta); ok {
			return m, nil
		}
	}
	m, err := decodeContainerMeta(rec)
	if err != nil {
		return nil, err
	}
	c.m.Store(rec.ID, m)
	return m, nil
}

// Delete forgets a removed container.
func (c *metaCache) Delete(id string) { c.m.Delete(id) }

func ipsOf(labels map[string]string) []string {
	if ips := labels[labelIPs]; ips != "" {
		return strings.Split(ips, ",")
	}
	return nil
}

func decodeSandboxMeta(c containers.Container) (*sandboxMeta, error) {
	var m sandboxMeta
	if err := decodeExtension(c, &m); err != nil {
		return nil, err
	}
	m.IPs = ipsOf(c.Labels)
	return &m, nil
}

func decodeContainerMeta(c containers.Container) (*containerMeta, error) {
	var m containerMeta
	if err := decodeExtension(c, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

func decodeExtension(c containers.Container, out interface{}) error {
	ext, ok := c.Extensions[extensionMeta]
	if !ok {
		return fmt.Errorf("container %s has no %s extension", c.ID, extensionMeta)
	}
	if err := typeurl.UnmarshalTo(ext, out); err != nil {
		return fmt.Errorf("decode metadata of %s: %w", c.ID, err)
	}
	return nil
}

func unixNanoLabel(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

func labelInt64(labels map[string]string, key string) int64 {
	v, err := strconv.ParseInt(labels[key], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// matchLabels reports whether every key of selector is in labels with the same value.
func matchLabels(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// The CRI labels the kubelet puts the pod's UID, name and namespace in.
const (
	criLabelPodUID       = podfacts.LabelPodUID
	criLabelPodName      = podfacts.LabelPodName
	criLabelPodNamespace = podfacts.LabelPodNamespace
)

// podUIDLabel is the value of labelPodUID for a sandbox or container: the pod UID of its CRI labels when they
// have one, else fallback (the sandbox's metadata). Lists filtered by the CRI pod-UID label then match on it
// before looking at anything else.
func podUIDLabel(criLabels map[string]string, fallback string) string {
	if uid := criLabels[criLabelPodUID]; uid != "" {
		return uid
	}
	return fallback
}

// listMatch selects the records of kind for a CRI label selector: those of the pod when the selector names a
// pod UID (the caller still checks every label of the CRI object), else all records of the kind.
func listMatch(kind string, selector map[string]string) func(containers.Container) bool {
	uid := selector[criLabelPodUID]
	return func(c containers.Container) bool {
		return c.Labels[labelKind] == kind && (uid == "" || c.Labels[labelPodUID] == uid)
	}
}

// labelIs selects the records whose label key has value v.
func labelIs(key, v string) func(containers.Container) bool {
	return func(c containers.Container) bool { return c.Labels[key] == v }
}

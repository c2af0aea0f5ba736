package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/internal/failpoint"
)

// Plugin directory names under pods/<uid>/volumes, as upstream's volume plugins name theirs.
const (
	pluginEmptyDir  = "kubernetes.io~empty-dir"
	pluginConfigMap = "kubernetes.io~configmap"
	pluginSecret    = "kubernetes.io~secret"
	pluginDownward  = "kubernetes.io~downward-api"
	pluginProjected = "kubernetes.io~projected"
	pluginLocal     = "kubernetes.io~local-volume"
)

// API is what the volume manager reads from the API server. Implementations are safe for concurrent use.
type API interface {
	ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
	// ServiceAccountToken requests a token of a service account (TokenRequest).
	ServiceAccountToken(ctx context.Context, namespace, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
	PersistentVolumeClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error)
	PersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error)
}

// Config configures a Manager. RootDir is required.
type Config struct {
	// RootDir is the kubelet's root directory: pod volumes live in <RootDir>/pods/<uid>/volumes.
	RootDir string
	// API reads the objects volumes project; nil: only emptyDir, hostPath and downwardAPI volumes.
	API API
	// Node returns what the downward API reads of the node (its name, allocatable).
	Node  func() NodeInfo
	Clock clock.PassiveClock
	// VolumeHealth asks the CSI drivers that offer it for their volumes' health with their stats
	// (upstream's CSIVolumeHealth, alpha and off by default).
	VolumeHealth bool
	// Mounter mounts tmpfs and binds; the host's when nil.
	Mounter Mounter
	// CSI finds the registered CSI drivers, and CSIAPI reads their CSIDriver objects and the volumes'
	// VolumeAttachments; nil: csi volumes wait for a driver that never registers.
	CSI    CSIDrivers
	CSIAPI CSIAPI
	// ClaimStatus records claims' status after the node's part of a volume expansion; nil: expansions wait.
	ClaimStatus ClaimStatus
	// ReportedInUse says whether the node's status (in the API) lists the attachable volume in
	// status.volumesInUse, asking for a status update when it does not; nil: attached volumes do not wait.
	ReportedInUse func(ctx context.Context, name v1.UniqueVolumeName) (bool, error)
	// Reuse is how long a configMap or secret read for a pod's volume serves the later syncs of the pods of
	// its namespace before it is read again (0: every sync reads it). The kubelet uses half its sync period: a
	// change reaches running pods within the sync period, and a burst of starting pods, each synced several
	// times in its first seconds, reads each object once.
	Reuse time.Duration
}

// NodeInfo is what volumes read of the node.
type NodeInfo struct {
	Name        string
	Allocatable v1.ResourceList
}

// Mounted is a volume set up on the host: the path the runtime mounts into containers, and whether every
// mount of it must be read-only (a claim's readOnly).
type Mounted struct {
	Path     string
	ReadOnly bool
	// Block says Path is a block device (a raw block volume, volumeMode Block): containers get it through
	// volumeDevices, as a device, never through volumeMounts.
	Block bool
	// Image says the volume is an image volume: nothing of it is on the node's disk (Path is empty); the
	// runtime mounts the image the kubelet pulled for it, read-only.
	Image bool
	// Calls are the calls to the volume's driver that setting it up made this time (a CSI volume's
	// NodeStageVolume and NodePublishVolume), for the pod's startup timeline.
	Calls []Call
}

// Call is one call to a volume's driver.
type Call struct {
	Name  string
	Start time.Time
	Took  time.Duration
}

// Manager sets up the volumes of the pods the node runs, and tears them down. A pod's volumes are set up
// again at every sync: configMap, secret, downwardAPI and projected contents follow their sources (an
// immutable object is read once), and service account tokens are renewed before they expire. It is safe for
// concurrent use; calls for one pod come from that pod's worker.
type Manager struct {
	cfg    Config
	tokens *tokenCache

	mu   sync.Mutex
	pods map[types.UID]*podState
	// recent holds the configMaps and secrets read within Config.Reuse, by "<kind>/<namespace>/<name>": the
	// pods of a namespace share them (kube-root-ca.crt is in every pod's token volume).
	recent map[string]readObject
	// reads joins the pods that miss recent for the same object at once (a burst of a namespace's pods) to
	// one read of it.
	reads singleflight.Group
	// csiLocks serialise the CSI operations on one volume.
	csiLocks keyedLocks
	// inFlight are the driver calls under way, by pod (one at a time per pod: its worker sets its volumes up
	// one after the other), for the debug page.
	inFlight map[types.UID]InFlightCall
	// callTimeout bounds each stage and publish call: csiTimeout, or the csi-call-timeout failpoint's.
	callTimeout time.Duration
}

// InFlightCall is a driver call under way for a pod's volume.
type InFlightCall struct {
	Call, Volume, Driver string
	Since                time.Time
}

// podState is what the manager remembers of one pod's volumes between syncs.
type podState struct {
	immutable map[string]any // objects read once: "configmap/<name>" and "secret/<name>"
}

// readObject is an object read for a pod's volume, and when.
type readObject struct {
	obj any
	at  time.Time
}

// New returns a manager for cfg.
func New(cfg Config) (*Manager, error) {
	if cfg.RootDir == "" {
		return nil, errors.New("volume: the root directory is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Mounter == nil {
		cfg.Mounter = hostMounter{}
	}
	if cfg.Node == nil {
		cfg.Node = func() NodeInfo { return NodeInfo{} }
	}
	timeout := failpoint.Duration(failpoint.CSICallTimeout)
	if timeout <= 0 {
		timeout = csiTimeout
	}
	return &Manager{cfg: cfg, tokens: newTokenCache(cfg.Clock), pods: map[types.UID]*podState{}, recent: map[string]readObject{},
		inFlight: map[types.UID]InFlightCall{}, callTimeout: timeout}, nil
}

// PodDir is <root>/pods/<uid>.
func (m *Manager) PodDir(uid types.UID) string {
	return filepath.Join(m.cfg.RootDir, "pods", string(uid))
}

func (m *Manager) volumeDir(uid types.UID, plugin, name string) string {
	return filepath.Join(m.PodDir(uid), "volumes", plugin, name)
}

// SetupError is the failure of one volume of a pod: the pod stays waiting (ContainerCreating), and the
// kubelet reports Message in a FailedMount event, as upstream words it.
type SetupError struct {
	Volume string
	Err    error
}

func (e *SetupError) Error() string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", e.Volume, e.Err)
}

func (e *SetupError) Unwrap() error { return e.Err }

// MountPod sets up the pod's volumes and returns them by name. Every volume is tried; the error joins a
// SetupError per volume that failed (the others are set up and returned).
func (m *Manager) MountPod(ctx context.Context, pod *v1.Pod) (map[string]Mounted, error) {
	if err := validateVolumes(pod); err != nil {
		return nil, err
	}
	st := m.state(pod.UID)
	// The volumes are set up at once, as upstream's operation executor does: a pod's token request and its
	// object reads overlap instead of adding up.
	mounts := make([]Mounted, len(pod.Spec.Volumes))
	errs := make([]error, len(pod.Spec.Volumes))
	var wg sync.WaitGroup
	for i := range pod.Spec.Volumes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vol := &pod.Spec.Volumes[i]
			if mounts[i], errs[i] = m.setUp(ctx, pod, vol, st); errs[i] != nil {
				errs[i] = &SetupError{Volume: vol.Name, Err: errs[i]}
			}
		}()
	}
	wg.Wait()
	out := make(map[string]Mounted, len(mounts))
	for i, mnt := range mounts {
		if errs[i] == nil {
			out[pod.Spec.Volumes[i].Name] = mnt
		}
	}
	return out, errors.Join(errs...)
}

// validateVolumes refuses a pod whose volume names repeat or whose mounts name a volume it does not have.
func validateVolumes(pod *v1.Pod) error {
	names := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if names[v.Name] {
			return fmt.Errorf("volume %q is defined twice in pod %s/%s", v.Name, pod.Namespace, pod.Name)
		}
		names[v.Name] = true
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, vm := range c.VolumeMounts {
				if !names[vm.Name] {
					return fmt.Errorf("container %q mounts volume %q, which pod %s/%s does not have", c.Name, vm.Name, pod.Namespace, pod.Name)
				}
			}
			for _, vd := range c.VolumeDevices {
				if !names[vd.Name] {
					return fmt.Errorf("container %q has volume %q as a device, which pod %s/%s does not have", c.Name, vd.Name, pod.Namespace, pod.Name)
				}
			}
		}
	}
	return nil
}

func (m *Manager) state(uid types.UID) *podState {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.pods[uid]
	if !ok {
		st = &podState{immutable: map[string]any{}}
		m.pods[uid] = st
	}
	return st
}

// setUp sets one volume up.
func (m *Manager) setUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, st *podState) (Mounted, error) {
	switch {
	case vol.EmptyDir != nil:
		p, err := m.setUpEmptyDir(pod, vol)
		return Mounted{Path: p}, err
	case vol.HostPath != nil:
		p := filepath.Clean(vol.HostPath.Path)
		return Mounted{Path: p}, checkHostPath(p, vol.HostPath.Type)
	case vol.ConfigMap != nil:
		return m.setUpProjection(ctx, pod, vol, pluginConfigMap, false, st)
	case vol.Secret != nil:
		return m.setUpProjection(ctx, pod, vol, pluginSecret, true, st)
	case vol.DownwardAPI != nil:
		return m.setUpProjection(ctx, pod, vol, pluginDownward, false, st)
	case vol.Projected != nil:
		return m.setUpProjection(ctx, pod, vol, pluginProjected, true, st)
	case vol.PersistentVolumeClaim != nil, vol.Ephemeral != nil:
		return m.setUpClaim(ctx, pod, vol)
	case vol.CSI != nil:
		return m.setUpCSI(ctx, pod, csiInline(pod, vol))
	case vol.Image != nil:
		// Pulled by the kubelet with the pod's credentials when a container starts; mounted by the runtime.
		return Mounted{Image: true, ReadOnly: true}, nil
	}
	return Mounted{}, fmt.Errorf("volume type %s is not supported on this node", volumeType(vol))
}

// volumeType names the source a volume uses, as its field in the API is named.
func volumeType(vol *v1.Volume) string {
	switch {
	case vol.NFS != nil:
		return "nfs"
	case vol.CSI != nil:
		return "csi"
	case vol.ISCSI != nil:
		return "iscsi"
	case vol.Ephemeral != nil:
		return "ephemeral"
	case vol.Image != nil:
		return "image"
	case vol.GitRepo != nil:
		return "gitRepo"
	}
	return "of this kind"
}

// UnmountPod tears the pod's volumes down: its CSI volumes are unpublished (and unstaged when no other pod
// uses them) by their drivers, what else is mounted below its volumes directory (tmpfs, binds) is
// unmounted, and the volumes directory is removed without following links. Sources outside the pod directory
// (hostPath volumes, host paths of claims) are never touched.
func (m *Manager) UnmountPod(ctx context.Context, uid types.UID) error {
	if err := m.tearDownCSI(ctx, uid); err != nil {
		return err
	}
	dir := filepath.Join(m.PodDir(uid), "volumes")
	mounts, err := MountsBelow(dir)
	if err != nil {
		return fmt.Errorf("read mounts: %w", err)
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := m.cfg.Mounter.Unmount(mounts[i]); err != nil {
			return fmt.Errorf("unmount %s: %w", mounts[i], err)
		}
		klog.FromContext(ctx).V(2).Info("Unmounted volume", "podUID", uid, "path", mounts[i])
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	m.mu.Lock()
	delete(m.pods, uid)
	m.mu.Unlock()
	m.tokens.forget(uid)
	return nil
}

// checkHostPath checks a hostPath volume's path against its type before a container starts, as upstream's
// hostPath plugin does: DirectoryOrCreate and FileOrCreate make what is missing.
func checkHostPath(p string, t *v1.HostPathType) error {
	typ := v1.HostPathUnset
	if t != nil {
		typ = *t
	}
	fi, err := os.Stat(p)
	missing := errors.Is(err, os.ErrNotExist)
	if err != nil && !missing {
		return fmt.Errorf("hostPath %s: %w", p, err)
	}
	is := func(kind string, ok func(os.FileMode) bool) error {
		if missing || !ok(fi.Mode()) {
			return fmt.Errorf("hostPath type check failed: %s is not a %s", p, kind)
		}
		return nil
	}
	switch typ {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if missing {
			return os.MkdirAll(p, 0o755)
		}
		return is("directory", os.FileMode.IsDir)
	case v1.HostPathFileOrCreate:
		if missing {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		return is("file", os.FileMode.IsRegular)
	case v1.HostPathDirectory:
		return is("directory", os.FileMode.IsDir)
	case v1.HostPathFile:
		return is("file", os.FileMode.IsRegular)
	case v1.HostPathSocket:
		return is("socket", func(m os.FileMode) bool { return m&os.ModeSocket != 0 })
	case v1.HostPathCharDev:
		return is("character device", func(m os.FileMode) bool { return m&os.ModeCharDevice != 0 })
	case v1.HostPathBlockDev:
		return is("block device", func(m os.FileMode) bool { return m&os.ModeDevice != 0 && m&os.ModeCharDevice == 0 })
	}
	return fmt.Errorf("hostPath type %q is not known", strings.TrimSpace(string(typ)))
}

package volume

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"k8s.io/apimachinery/pkg/types"
)

// Usage is what a directory tree holds on its filesystem: bytes of the blocks allocated (as du counts them)
// and inodes.
type Usage struct {
	Bytes  int64
	Inodes int64
}

// DirUsage measures the tree at dir without following links, counting each inode once (hard links). A
// missing dir is empty; files that vanish while it walks are skipped.
func DirUsage(dir string) (Usage, error) {
	var u Usage
	seen := map[uint64]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if seen[st.Ino] {
			return nil
		}
		seen[st.Ino] = true
		u.Inodes++
		u.Bytes += st.Blocks * 512
		return nil
	})
	return u, err
}

// PodUsage measures each volume the pod has below its directory (emptyDir, configMap, secret, downwardAPI,
// projected and local volumes), by volume name: what eviction and the node's stats count against the pod.
// Volumes of the host (hostPath, hostPath claims) and CSI volumes (a driver's storage) are not the pod's
// and are left out.
func (m *Manager) PodUsage(uid types.UID) (map[string]Usage, error) {
	out := map[string]Usage{}
	plugins, err := os.ReadDir(filepath.Join(m.PodDir(uid), "volumes"))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, p := range plugins {
		if p.Name() == pluginCSI {
			continue // the drivers' storage, not the node's: walking it would read a whole disk per gathering
		}
		vols, err := os.ReadDir(filepath.Join(m.PodDir(uid), "volumes", p.Name()))
		if err != nil {
			continue
		}
		for _, v := range vols {
			u, err := DirUsage(filepath.Join(m.PodDir(uid), "volumes", p.Name(), v.Name()))
			if err != nil {
				return nil, err
			}
			out[v.Name()] = u
		}
	}
	return out, nil
}

// PodLogDir is the directory a pod's container logs are written to: <root>/<namespace>_<name>_<uid>, as
// upstream lays them out under /var/log/pods.
func PodLogDir(root, namespace, name string, uid types.UID) string {
	return filepath.Join(root, namespace+"_"+name+"_"+string(uid))
}

// PodLogUsage measures a pod's logs (every container's, rotated files included) below root, the node's pod
// log directory. The writable layers of its containers are the runtime's to measure: CRI's ContainerStats
// reports them.
func PodLogUsage(root, namespace, name string, uid types.UID) (Usage, error) {
	return DirUsage(PodLogDir(root, namespace, name, uid))
}

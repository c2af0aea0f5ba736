package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/nodeagent/kubelet/internal/ociimage"
	"github.com/nodeagent/kubelet/pkg/cluster/nodeinit"
	"github.com/nodeagent/kubelet/pkg/nodedefaults"
)

// ImageSources are the host files a node image is made from.
type ImageSources struct {
	BinDir        string // the project's kubelet, apiserver and nodeinit
	ContainerdDir string // containerd, containerd-shim-runc-v2, runc (and ctr)
	CNIBinDir     string // the CNI plugins
	ImagesDir     string // pause.tar and busybox.tar, preloaded by each node's kubelet
}

// iptablesTools are the names the CNI plugins and the runtime run iptables by; on Debian all are
// xtables-nft-multi.
var iptablesTools = []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"}

// nodeContainerdConfig is the node's containerd: the paths the kubelet's built-in runtime expects by
// default, without the CRI plugin (the kubelet brings its own runtime).
const nodeContainerdConfig = `version = 2
root = "` + nodeinit.ContainerdRoot + `"
state = "/run/nodeagent/containerd"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images"]

[grpc]
  address = "/run/nodeagent/containerd/containerd.sock"
`

// nodeCNITemplateText is the pod network of a node: a bridge over the node's pod CIDR, which the kubelet
// renders once the API server has assigned it.
const nodeCNITemplateText = `{
  "cniVersion": "1.0.0",
  "name": "nodeagent",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [{{range $i, $r := .PodCIDRRanges}}{{if $i}}, {{end}}[{"subnet": "{{$r}}"}]{{end}}],
        "routes": [{{range $i, $r := .Routes}}{{if $i}}, {{end}}{"dst": "{{$r}}"}{{end}}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}
  ]
}
`

// NodeImageSpec lists what a node image holds: the binaries, the shared libraries and iptables modules
// they load, the node's configuration files, and the image archives.
func NodeImageSpec(src ImageSources) (ociimage.Spec, error) {
	s := ociimage.Spec{Config: ociimage.Config{
		Entrypoint: []string{nodeinit.Bin + "/nodeinit"},
		Env:        []string{ociimage.DefaultPath},
	}}
	var elves []string
	add := func(from, to string) error {
		if _, err := os.Stat(from); err != nil {
			return fmt.Errorf("node image: %w", err)
		}
		s.Files = append(s.Files, ociimage.File{Path: to, Source: from})
		elves = append(elves, from)
		return nil
	}
	for _, b := range []string{"kubelet", "apiserver", "nodeinit", "containerlogd"} {
		if err := add(filepath.Join(src.BinDir, b), filepath.Join(nodeinit.Bin, b)); err != nil {
			return s, fmt.Errorf("%w (make build writes it)", err)
		}
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr"} {
		if err := add(filepath.Join(src.ContainerdDir, b), filepath.Join(nodeinit.Bin, b)); err != nil {
			return s, fmt.Errorf("%w (make setup installs it)", err)
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if err := add(filepath.Join(src.CNIBinDir, p), filepath.Join(nodeinit.CNIBin, p)); err != nil {
			return s, err
		}
	}
	xtables, err := exec.LookPath("xtables-nft-multi")
	if err != nil {
		return s, fmt.Errorf("node image: iptables (xtables-nft-multi) not found: %w", err)
	}
	if err := add(xtables, "/usr/sbin/xtables-nft-multi"); err != nil {
		return s, err
	}
	s.Symlinks = append(s.Symlinks, ociimage.Symlink{Path: "/var/run", Target: "../run"})
	for _, t := range iptablesTools {
		s.Symlinks = append(s.Symlinks, ociimage.Symlink{Path: "/usr/sbin/" + t, Target: "xtables-nft-multi"})
	}
	modules, _ := filepath.Glob("/usr/lib/*-linux-gnu/xtables/*.so")
	for _, m := range modules {
		if err := add(m, m); err != nil {
			return s, err
		}
	}
	libs, err := sharedLibraries(elves)
	if err != nil {
		return s, err
	}
	for _, l := range libs {
		s.Files = append(s.Files, ociimage.File{Path: l, Source: l})
	}
	for _, img := range []string{"pause.tar", "busybox.tar"} {
		from := filepath.Join(src.ImagesDir, img)
		if _, err := os.Stat(from); err != nil {
			return s, fmt.Errorf("node image: %w (make setup writes it)", err)
		}
		s.Files = append(s.Files, ociimage.File{Path: filepath.Join(nodeinit.ImagesDir, img), Source: from})
	}
	for _, f := range []string{"/etc/protocols", "/etc/services"} {
		if _, err := os.Stat(f); err == nil {
			s.Files = append(s.Files, ociimage.File{Path: f, Source: f, Mode: 0o644})
		}
	}
	s.Files = append(s.Files,
		ociimage.File{Path: nodeinit.ContainerdConfig, Data: []byte(nodeContainerdConfig)},
		ociimage.File{Path: nodeinit.CNITemplate, Data: []byte(nodeCNITemplateText)},
		ociimage.File{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/bin/false\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		ociimage.File{Path: "/etc/group", Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
		ociimage.File{Path: "/etc/hosts", Data: []byte("127.0.0.1 localhost\n::1 localhost\n")},
		ociimage.File{Path: "/etc/resolv.conf", Data: []byte("# a node of a nodeagent cluster: no DNS server\n")},
		ociimage.File{Path: "/etc/nsswitch.conf", Data: []byte("passwd: files\ngroup: files\nhosts: files\nprotocols: files\nservices: files\n")},
	)
	for _, d := range []string{"/tmp", "/run", "/root", nodedefaults.RootDir, "/var/log", "/etc/nodeagent/cni/net.d", nodeinit.Shared, nodeinit.Own, nodeinit.ContainerdRoot, "/proc", "/sys", "/dev", "/lib/modules"} {
		s.Dirs = append(s.Dirs, ociimage.Dir{Path: d})
	}
	return s, nil
}

// sharedLibraries returns the shared libraries (and the dynamic loader) the ELF files load, as ldd finds
// them on this host; static binaries add none.
func sharedLibraries(files []string) ([]string, error) {
	seen := map[string]bool{}
	for _, f := range files {
		out, err := exec.Command("ldd", f).Output()
		if err != nil {
			continue // not a dynamic executable
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			for _, field := range strings.Fields(sc.Text()) {
				if strings.HasPrefix(field, "/") {
					seen[field] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for l := range seen {
		if _, err := os.Stat(l); err != nil {
			return nil, fmt.Errorf("node image: a shared library ldd names is missing: %w", err)
		}
		out = append(out, l)
	}
	sort.Strings(out)
	return out, nil
}

// fingerprint names a node image by its inputs: the files' paths, sizes and modification times and the
// generated files' contents. The same inputs name the same image, which is then not built again.
func fingerprint(s ociimage.Spec) (string, error) {
	h := sha256.New()
	for _, f := range s.Files {
		fmt.Fprintf(h, "%s\x00", f.Path)
		if f.Source == "" {
			h.Write(f.Data)
			continue
		}
		st, err := os.Stat(f.Source)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d %d\x00", f.Source, st.Size(), st.ModTime().UnixNano())
	}
	for _, l := range s.Symlinks {
		fmt.Fprintf(h, "%s->%s\x00", l.Path, l.Target)
	}
	for _, d := range s.Dirs {
		fmt.Fprintf(h, "%s/\x00", d.Path)
	}
	fmt.Fprintf(h, "%q", s.Config)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// EnsureNodeImage builds the node image from src and imports it into the host's containerd, unless an
// image of the same inputs is there; it returns the image's name.
func EnsureNodeImage(ctx context.Context, client *containerd.Client, src ImageSources) (string, error) {
	spec, err := NodeImageSpec(src)
	if err != nil {
		return "", err
	}
	fp, err := fingerprint(spec)
	if err != nil {
		return "", err
	}
	ref := "localhost/nodeagent-node:" + fp
	if _, err := client.GetImage(ctx, ref); err == nil {
		return ref, nil
	} else if !errdefs.IsNotFound(err) {
		return "", err
	}
	img, err := ociimage.Build(spec)
	if err != nil {
		return "", fmt.Errorf("build the node image: %w", err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(img.WriteArchive(pw, ref)) }()
	imgs, err := client.Import(ctx, pr)
	_ = pr.CloseWithError(err)
	if err != nil {
		return "", fmt.Errorf("import the node image: %w", err)
	}
	for _, i := range imgs {
		if err := containerd.NewImage(client, i).Unpack(ctx, "overlayfs"); err != nil {
			return "", fmt.Errorf("unpack the node image: %w", err)
		}
	}
	return ref, pruneNodeImages(ctx, client, ref)
}

// pruneNodeImages deletes the node images other than keep that no node container uses: each build of
// changed binaries makes a new one (about 200 MB).
func pruneNodeImages(ctx context.Context, client *containerd.Client, keep string) error {
	used := map[string]bool{keep: true}
	cs, err := client.Containers(ctx)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if info, err := c.Info(ctx); err == nil {
			used[info.Image] = true
		}
	}
	imgs, err := client.ImageService().List(ctx, `name~="^localhost/nodeagent-node:"`)
	if err != nil {
		return err
	}
	for _, img := range imgs {
		if !used[img.Name] {
			if err := client.ImageService().Delete(ctx, img.Name); err != nil && !errdefs.IsNotFound(err) {
				return fmt.Errorf("remove the old node image %s: %w", img.Name, err)
			}
		}
	}
	return nil
}

// lockNodeImages takes the host's node image lock, waiting while another up holds it, and returns its
// release (safe to call twice).
func lockNodeImages(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(StateRoot, 0o755); err != nil {
		return nil, err
	}
	return lockFile(ctx, filepath.Join(StateRoot, "image.lock"))
}

// lockFile takes an flock on path (made if missing), waiting while another process or descriptor holds it
// until ctx ends.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	var once sync.Once
	return func() { once.Do(func() { f.Close() }) }, nil
}

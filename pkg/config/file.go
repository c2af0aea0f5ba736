package config

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// fileSource reads static pod manifests from a directory: at start, on every change inotify reports, and
// every FileResync. A file that fails to decode is reported once per distinct error and skipped.
type fileSource struct {
	opts Options
	out  *Sources
	bad  map[string]string // path -> last error reported
}

func newFileSource(opts Options, out *Sources) *fileSource {
	return &fileSource{opts: opts, out: out, bad: map[string]string{}}
}

func (f *fileSource) run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("path", f.opts.ManifestDir)
	changes, stop := watchDir(f.opts.ManifestDir)
	defer stop()
	f.list(ctx, logger)
	ticker := f.opts.Clock.NewTicker(FileResync)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case _, ok := <-changes:
			if !ok {
				changes = nil
				continue
			}
		}
		if changes == nil {
			stop()
			changes, stop = watchDir(f.opts.ManifestDir)
		}
		f.list(ctx, logger)
	}
}

// list reads every manifest and hands the full set to Sources.
func (f *fileSource) list(ctx context.Context, logger klog.Logger) {
	entries, err := os.ReadDir(f.opts.ManifestDir)
	if err != nil {
		if f.bad[""] != err.Error() {
			logger.Info("Cannot read the static pod manifest directory", "err", err)
			f.bad[""] = err.Error()
		}
		f.out.markSynced(ctx, SourceFile)
		return
	}
	delete(f.bad, "")
	var pods []*v1.Pod
	seen := map[types.UID]string{}
	names := map[string]string{}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(f.opts.ManifestDir, name)
		pod, err := readManifest(path, f.opts.NodeName)
		if err == nil {
			if other, dup := names[pod.Namespace+"/"+pod.Name]; dup {
				err = errDuplicate(pod, other)
			} else if other, dup := seen[pod.UID]; dup {
				err = errDuplicate(pod, other)
			}
		}
		if err != nil {
			f.report(logger, path, err)
			continue
		}
		delete(f.bad, path)
		seen[pod.UID] = path
		names[pod.Namespace+"/"+pod.Name] = path
		pods = append(pods, pod)
	}
	for path := range f.bad {
		if _, err := os.Stat(path); path != "" && os.IsNotExist(err) {
			delete(f.bad, path)
		}
	}
	f.out.replace(ctx, SourceFile, pods)
	f.out.markSynced(ctx, SourceFile)
}

// report logs and records an event for a bad manifest, once per distinct error.
func (f *fileSource) report(logger klog.Logger, path string, err error) {
	if f.bad[path] == err.Error() {
		return
	}
	f.bad[path] = err.Error()
	logger.Error(err, "Skipping static pod manifest", "file", path)
	ref := &v1.ObjectReference{Kind: "Node", Name: f.opts.NodeName, UID: types.UID(f.opts.NodeName)}
	f.opts.Recorder.Eventf(ref, v1.EventTypeWarning, "FailedStaticPodManifest", "Skipping manifest %s: %v", path, err)
}

func readManifest(path, nodeName string) (*v1.Pod, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxManifestSize+1))
	if err != nil {
		return nil, err
	}
	return DecodeManifest(data, path, nodeName)
}

type dupError struct{ pod, other string }

func (e dupError) Error() string { return "pod " + e.pod + " is already defined in " + e.other }

func errDuplicate(pod *v1.Pod, other string) error {
	return dupError{pod: pod.Namespace + "/" + pod.Name, other: other}
}

// watchDir reports changes in dir through inotify. The channel closes when the watch ends (the directory
// went away, or it could not be watched); the periodic relist carries on.
func watchDir(dir string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		close(ch)
		return ch, func() {}
	}
	mask := uint32(unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO |
		unix.IN_MOVED_FROM | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ATTRIB)
	if _, err := unix.InotifyAddWatch(fd, dir, mask); err != nil {
		_ = unix.Close(fd)
		close(ch)
		return ch, func() {}
	}
	file := os.NewFile(uintptr(fd), "inotify")
	go func() {
		defer close(ch)
		buf := make([]byte, 64<<10)
		for {
			n, err := file.Read(buf)
			if err != nil || n <= 0 {
				return
			}
			gone := false
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafePointer(&buf[off]))
				if ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0 {
					gone = true
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
			select {
			case ch <- struct{}{}:
			default:
			}
			if gone {
				return
			}
		}
	}()
	return ch, func() { _ = file.Close() }
}

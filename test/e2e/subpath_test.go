//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/pkg/volume"
)

// swapLoop swaps vol/dir with a symlink to / and back (renameat2 RENAME_EXCHANGE, so that vol/dir always
// exists), pausing between swaps, until stop closes; it counts swaps.
func swapLoop(t *testing.T, vol string, pause time.Duration, stop <-chan struct{}, swaps *atomic.Int64) {
	dir, link := filepath.Join(vol, "dir"), filepath.Join(vol, "link")
	if err := os.Symlink("/", link); err != nil {
		t.Error(err)
		return
	}
	exchange := func() error { return unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE) }
	for {
		select {
		case <-stop:
			if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				_ = exchange()
			}
			_ = os.Remove(link)
			return
		default:
		}
		if err := exchange(); err != nil {
			t.Errorf("swap: %v", err)
			return
		}
		if pause > 0 {
			time.Sleep(pause) // the symlink stays as long as the directory does
		}
		_ = exchange()
		swaps.Add(1)
		if pause > 0 {
			time.Sleep(pause)
		}
	}
}

// A subPath whose directory is swapped for a symlink to the host's / in a loop (as a container writing the
// volume can) is never bound to a host path: every bind that succeeds shows the volume's own directory.
func TestSubPathRaceNeverMountsHostPath(t *testing.T) {
	vol := t.TempDir()
	if err := os.MkdirAll(filepath.Join(vol, "dir", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "dir", "sub", "inside-marker"), []byte("volume"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var swaps atomic.Int64
	done := make(chan struct{})
	go func() { defer close(done); swapLoop(t, vol, 0, stop, &swaps) }()
	defer func() { close(stop); <-done }()

	targets := t.TempDir()
	var bound, refused int
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; time.Now().Before(deadline) && i < 3000; i++ {
		target := filepath.Join(targets, "t")
		err := volume.BindSubPath(vol, "dir/sub", target)
		if err != nil {
			refused++
			continue
		}
		bound++
		_, markerErr := os.Stat(filepath.Join(target, "inside-marker"))
		_, hostErr := os.Stat(filepath.Join(target, "etc", "passwd"))
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
			t.Fatal(err)
		}
		if markerErr != nil || hostErr == nil {
			t.Fatalf("bind %d shows a host path: marker %v, /etc/passwd %v", i, markerErr, hostErr)
		}
	}
	t.Logf("%d binds, %d refused while the path changed, %d swaps", bound, refused, swaps.Load())
	if bound == 0 || swaps.Load() == 0 {
		t.Fatalf("the race did not run: %d binds, %d swaps", bound, swaps.Load())
	}
	if refused == 0 {
		t.Errorf("no bind met the swap: the race was not exercised")
	}
	if err := volume.CleanSubPaths(targets); err != nil {
		t.Fatal(err)
	}
}

// The same race through the kubelet: pods mount a hostPath volume's subPath while its directory is swapped
// for a symlink to / in a loop. Every container that starts sees the volume's directory, never the host's.
func TestKubeletSubPathRace(t *testing.T) {
	parallel(t)
	n := startNode(t)
	vol := filepath.Join(n.dir, "shared")
	if err := os.MkdirAll(filepath.Join(vol, "dir"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "dir", "inside-marker"), []byte("volume"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostVol := func(p *v1.Pod) *v1.Pod {
		p.Spec.Volumes = []v1.Volume{{Name: "shared", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: vol}}}}
		return p
	}
	stop := make(chan struct{})
	var swaps atomic.Int64
	swapped := make(chan struct{})
	go func() { defer close(swapped); swapLoop(t, vol, 2*time.Millisecond, stop, &swaps) }()
	defer func() { close(stop); <-swapped }()

	const pods = 4
	for i := 0; i < pods; i++ {
		p := hostVol(busyboxPod(podName("victim", i), "sh", "-c",
			"if test -e /mnt/inside-marker && ! test -e /mnt/etc/passwd; then echo SAFE; else echo ESCAPED; ls /mnt; fi; exec sleep 3600"))
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "shared", MountPath: "/mnt", SubPath: "dir"}}
		n.createPod(p)
	}
	for i := 0; i < pods; i++ {
		name := podName("victim", i)
		n.waitPod(name, 120*time.Second, "the victim runs", ready)
		var logs string
		eventually(t, 30*time.Second, "the victim's verdict in its log", func() error {
			b, err := n.client.CoreV1().Pods("default").GetLogs(name, &v1.PodLogOptions{}).Do(context.Background()).Raw()
			logs = string(b)
			if err != nil || logs == "" {
				return errors.Join(err, errors.New("no log yet"))
			}
			return nil
		})
		if !strings.HasPrefix(logs, "SAFE") {
			t.Errorf("pod %s saw a host path through its subPath:\n%s", name, logs)
		}
	}
	// Refused binds are reported as CreateContainerConfigError and retried, never as a started container.
	for i := 0; i < pods; i++ {
		_ = n.client.CoreV1().Pods("default").Delete(context.Background(), podName("victim", i), metav1.DeleteOptions{})
	}
}

func podName(prefix string, i int) string { return prefix + "-" + strconv.Itoa(i) }

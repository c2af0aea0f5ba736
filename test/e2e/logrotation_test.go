//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// burstLines is how many numbered lines of about 100 bytes each of the three bursts writes (10 MiB).
const burstLines = 100000

// Container logs are rotated as upstream rotates them, on both runtime backends: a container writing 30 MiB in
// three bursts against a 1 MiB limit leaves the current file, one rotated file and gzipped older ones (3 at
// most), every line in order across them; the /var/log/containers link points at the current file and goes
// with the pod; `kubectl logs -f` started before the writes follows across every rotation and loses no line;
// /logs/ serves the link through the API server.
func TestKubeletLogRotation(t *testing.T) {
	// Not beside others: its 30 MiB go through the log writer against deadlines, which the CPU taken by tests
	// beside it stretched past 90 s (35 s alone).
	forEachRuntime(t, func(t *testing.T, n *node) {
		pod := busyboxPod("chatty", "sh", "-c", fmt.Sprintf(`sleep 6; for b in 1 2 3; do
awk -v b=$b 'BEGIN { for (i = 1; i <= %d; i++) printf "burst %%d line %%07d 0123456789012345678901234567890123456789012345678901234567890123456789012345\n", b, i }'
sleep 4; done; echo done; exec sleep 3600`, burstLines))
		n.createPod(pod)
		p := n.waitPod("chatty", 60*time.Second, "running", func(p *v1.Pod) error {
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
				return fmt.Errorf("not running")
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		kc := filepath.Join(n.dir, "admin.kubeconfig")
		if n.cp != nil {
			kc = n.cp.kubeconfig
		}
		follow := exec.CommandContext(ctx, kubectlPath, "--kubeconfig", kc, "logs", "-f", "chatty")
		var followed bytes.Buffer
		follow.Stdout = &followed
		if err := follow.Start(); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(n.logs, "default_chatty_"+string(p.UID), "main")
		// Done (the last line in the current file, or in the file rotated last), and the current file under
		// the limit: no rotation can run while the files are read below.
		eventually(t, 90*time.Second, "all bursts written and the last rotation done", func() error {
			b, err := os.ReadFile(filepath.Join(dir, "0.log"))
			if err != nil {
				return err
			}
			if len(b) > 1<<20 {
				return fmt.Errorf("0.log holds %d bytes, over the 1 MiB limit: to be rotated", len(b))
			}
			if bytes.Contains(b, []byte(" done\n")) {
				return nil
			}
			rotated, _ := filepath.Glob(filepath.Join(dir, "0.log.*[0-9]"))
			sort.Strings(rotated)
			if len(rotated) > 0 {
				if last, err := os.ReadFile(rotated[len(rotated)-1]); err == nil && bytes.Contains(last, []byte(" done\n")) {
					return nil
				}
			}
			return fmt.Errorf("not done yet")
		})
		time.Sleep(2 * time.Second) // kubectl logs -f reads the last lines
		cancel()
		_ = follow.Wait()

		// The newest rotated file stays as it is a while (a follower may still read it); older ones are gzipped
		// within the log writer's next passes.
		var names []string
		eventually(t, 40*time.Second, "older rotated files gzipped", func() error {
			entries, err := os.ReadDir(dir)
			if err != nil {
				return err
			}
			names = names[:0]
			for _, e := range entries {
				names = append(names, e.Name())
			}
			sort.Strings(names)
			var gz, plain int
			for _, name := range names {
				switch {
				case strings.HasSuffix(name, ".gz"):
					gz++
				case name != "0.log":
					plain++
				}
			}
			if len(names) > 3 || plain != 1 || gz < 1 {
				return fmt.Errorf("log files %v: want the current one, one rotated and gzipped older ones, 3 at most", names)
			}
			return nil
		})

		// Every line on disk, oldest file first: bursts in order, no line twice, only the oldest ones gone
		// with the files past the limit. A line the runtime split at a reopen (a partial record ending one
		// file, the rest beginning the next) is one line, as kubectl logs reads it.
		var records []logRecord
		for _, name := range append(names[1:], names[0]) {
			records = append(records, readLogRecords(t, filepath.Join(dir, name))...)
		}
		checkSequence(t, "on disk", joinPartials(records), false)
		// kubectl logs -f: every line, from the first.
		checkSequence(t, "kubectl logs -f", strings.Split(strings.TrimSuffix(followed.String(), "\n"), "\n"), true)

		// The link of log shippers, and /logs/ through the API server.
		cs := p.Status.ContainerStatuses[0]
		_, id, _ := strings.Cut(cs.ContainerID, "://")
		// Beside the pod log directory: /var/log/containers, or the slots' links directory under /var/log.
		link := filepath.Join(filepath.Dir(n.logs), "containers", fmt.Sprintf("chatty_default_main-%s.log", id))
		if target, err := os.Readlink(link); err != nil || target != filepath.Join(dir, "0.log") {
			t.Errorf("link %s -> %q, %v", link, target, err)
		}
		// The current log as it is on disk (the last write may have filled it and rotated it, leaving it empty).
		want, err := os.ReadFile(filepath.Join(dir, "0.log"))
		if err != nil {
			t.Fatal(err)
		}
		if got := n.raw(t, "logs/"+strings.TrimPrefix(link, "/var/log/")); !bytes.Equal(got, want) {
			t.Errorf("/logs/ through the link: %d bytes, the current log %d", len(got), len(want))
		}
		n.deletePodAndWait(t, "chatty")
		eventually(t, 30*time.Second, "the link goes with the pod", func() error {
			if _, err := os.Lstat(link); err == nil {
				return fmt.Errorf("%s still there", link)
			}
			return nil
		})
	}, "--container-log-max-size", "1Mi", "--container-log-max-files", "3", "--container-log-monitor-interval", "3s")
}

// logRecord is a CRI log record's message and whether it is partial (tag P: the line goes on in the next).
type logRecord struct {
	msg     string
	partial bool
}

// joinPartials makes lines of records, each partial one joined to those that follow up to a full one.
func joinPartials(records []logRecord) []string {
	var out []string
	var pending strings.Builder
	for _, r := range records {
		pending.WriteString(r.msg)
		if !r.partial {
			out = append(out, pending.String())
			pending.Reset()
		}
	}
	if pending.Len() > 0 {
		out = append(out, pending.String())
	}
	return out
}

// readLogLines reads the lines of a CRI log file, gzipped or not.
func readLogLines(t *testing.T, path string) []string {
	t.Helper()
	return joinPartials(readLogRecords(t, path))
}

// readLogRecords reads the records of a CRI log file, gzipped or not.
func readLogRecords(t *testing.T, path string) []logRecord {
	t.Helper()
	out, err := parseLogFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// parseLogFile reads the records of a CRI log file, gzipped or not.
func parseLogFile(path string) ([]logRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		r = zr
	}
	var out []logRecord
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		// "<time> <stream> <tag> <message>"
		parts := strings.SplitN(s.Text(), " ", 4)
		if len(parts) == 4 {
			out = append(out, logRecord{msg: parts[3], partial: parts[2] == "P"})
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return out, nil
}

// checkSequence checks that lines are the bursts' numbered lines in order, each once, then "done"; with
// complete, from the very first line.
func checkSequence(t *testing.T, what string, lines []string, complete bool) {
	t.Helper()
	if len(lines) == 0 || lines[len(lines)-1] != "done" {
		t.Errorf("%s: %d lines, the last not \"done\"", what, len(lines))
		return
	}
	lines = lines[:len(lines)-1]
	// On disk the oldest file left may begin with the tail of a line whose head went with an older file, past
	// the limit (the runtime split the line at a reopen): not a line of its own.
	if !complete && len(lines) > 0 && !strings.HasPrefix(lines[0], "burst ") {
		lines = lines[1:]
	}
	if complete && len(lines) != 3*burstLines {
		t.Errorf("%s: %d lines, want %d", what, len(lines), 3*burstLines)
	}
	first := 3*burstLines - len(lines)
	for i, l := range lines {
		k := first + i
		want := fmt.Sprintf("burst %d line %07d ", k/burstLines+1, k%burstLines+1)
		if !strings.HasPrefix(l, want) {
			t.Errorf("%s: line %d is %.40q, want %q", what, i, l, want)
			return
		}
	}
}

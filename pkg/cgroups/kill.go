package cgroups

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// killPoll is the pause between rounds of killing a cgroup's processes.
	killPoll = 10 * time.Millisecond
	// killRounds bounds the rounds: about 2 s of processes refusing to go.
	killRounds = 200
)

// killProcesses sends SIGKILL to every process in the cgroup and its
// sub-cgroups, in every hierarchy, until none is left. On v2 it writes
// cgroup.kill first where the kernel has it.
func (m *Manager) killProcesses(ctx context.Context, name cgroupName) error {
	pids, err := m.cgroupPids(name)
	if err != nil {
		return err
	}
	if len(pids) > 0 && m.layout.mode.unified() {
		dir := m.layout.dir(name, "")
		if fileExists(filepath.Join(dir, "cgroup.kill")) {
			if err := writeFile(dir, "cgroup.kill", "1"); err != nil {
				return err
			}
			if pids, err = m.cgroupPids(name); err != nil {
				return err
			}
		}
	}
	self := os.Getpid()
	for round := 0; len(pids) > 0; round++ {
		if round == killRounds {
			return fmt.Errorf("%d processes still in cgroup %s after SIGKILL: %v", len(pids), m.layout.rel(name), pids)
		}
		if round > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("kill processes in cgroup %s: %w", m.layout.rel(name), ctx.Err())
			case <-m.cfg.Clock.After(killPoll):
			}
		}
		for _, pid := range pids {
			if pid <= 1 || pid == self {
				return fmt.Errorf("refusing to kill process %d found in cgroup %s", pid, m.layout.rel(name))
			}
			if err := m.deps.kill(pid); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kill process %d in cgroup %s: %w", pid, m.layout.rel(name), err)
			}
		}
		if pids, err = m.cgroupPids(name); err != nil {
			return err
		}
	}
	return nil
}

// cgroupPids returns the processes in the cgroup and its sub-cgroups,
// gathered over every hierarchy, sorted.
func (m *Manager) cgroupPids(name cgroupName) ([]int, error) {
	seen := map[int]bool{}
	for _, dir := range m.layout.paths(name) {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone while walking
			}
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			pids, err := readProcs(filepath.Join(p, "cgroup.procs"))
			for _, pid := range pids {
				seen[pid] = true
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("list processes of cgroup %s: %w", m.layout.rel(name), err)
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// readProcs reads a cgroup.procs file; a missing file is an empty cgroup, and so is one whose cgroup was
// removed after it was opened (the kernel answers ENODEV: runc removing a container's cgroup while the pod's
// is emptied).
func readProcs(path string) (_ []int, retErr error) {
	defer func() {
		if errors.Is(retErr, syscall.ENODEV) {
			retErr = nil
		}
	}()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []int
	s := bufio.NewScanner(f)
	for s.Scan() {
		t := strings.TrimSpace(s.Text())
		if t == "" {
			continue
		}
		pid, err := strconv.Atoi(t)
		if err != nil {
			return nil, fmt.Errorf("%s: bad pid %q", path, t)
		}
		out = append(out, pid)
	}
	return out, s.Err()
}

package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	cri "k8s.io/cri-api/pkg/apis"
)

// execRounds and execsPerRound: the backends take turns, a round of execs each, so that a change in the
// machine's load falls on both alike.
const (
	execRounds    = 4
	execsPerRound = 50
)

// runExec runs the command of an exec probe (`cat /etc/hostname`) in one container of each backend, 200
// times each, and prints per exec: the latency (p50, p99), the CPU of this process (the built-in runtime's
// client side runs in it; the CRI plugin's client is a bare gRPC call), and the CPU of containerd and the
// pod's shim (runc exec). This is what one exec probe costs the node.
func runExec(ctx context.Context, builtin, plugin cri.RuntimeService) error {
	type side struct {
		name, ns string
		rt       cri.RuntimeService
		sandbox  string
		ctr      string
		lat      []time.Duration
		self     time.Duration
		ctrd     float64
		shims    float64
	}
	sides := []*side{{name: "builtin", ns: "nodeagent", rt: builtin}, {name: "criplugin", ns: "k8s.io", rt: plugin}}
	defer func() {
		for _, s := range sides {
			if s.sandbox != "" {
				_ = s.rt.StopPodSandbox(ctx, s.sandbox)
				_ = s.rt.RemovePodSandbox(ctx, s.sandbox)
			}
		}
	}()
	for i, s := range sides {
		_, id, err := startPod(ctx, s.rt, 1000+i)
		s.sandbox = id
		if err != nil {
			return fmt.Errorf("%s exec pod: %w", s.name, err)
		}
		ctrs, err := s.rt.ListContainers(ctx, nil)
		if err != nil {
			return err
		}
		for _, c := range ctrs {
			if c.PodSandboxId == id {
				s.ctr = c.Id
			}
		}
		if _, _, err := s.rt.ExecSync(ctx, s.ctr, []string{"cat", "/etc/hostname"}, 5*time.Second); err != nil {
			return fmt.Errorf("%s exec: %w", s.name, err)
		}
	}
	for round := 0; round < execRounds; round++ {
		for j := range sides {
			s := sides[(round+j)%2]
			stop := runtimeCPU(s.ns)
			self0 := selfCPU()
			for i := 0; i < execsPerRound; i++ {
				t0 := time.Now()
				if _, _, err := s.rt.ExecSync(ctx, s.ctr, []string{"cat", "/etc/hostname"}, 5*time.Second); err != nil {
					return fmt.Errorf("%s exec: %w", s.name, err)
				}
				s.lat = append(s.lat, time.Since(t0))
			}
			s.self += selfCPU() - self0
			c, sh := stop()
			s.ctrd += c
			s.shims += sh
		}
	}
	for _, s := range sides {
		n := float64(len(s.lat))
		figure("runtime_exec_"+s.name+"_p50", ms(percentile(s.lat, 50)), "ms")
		figure("runtime_exec_"+s.name+"_p99", ms(percentile(s.lat, 99)), "ms")
		figure("runtime_exec_"+s.name+"_client_cpu", ms(s.self)/n, "ms-cpu/exec")
		figure("runtime_exec_"+s.name+"_containerd_cpu", s.ctrd*1000/n, "ms-cpu/exec")
		figure("runtime_exec_"+s.name+"_shim_cpu", s.shims*1000/n, "ms-cpu/exec")
	}
	return nil
}

// selfCPU is the CPU time this process has used, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

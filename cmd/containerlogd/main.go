package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/logd"
)

func main() {
	socket := flag.String("socket", logd.DefaultSocket(logd.DefaultDir, "nodeagent"), "unix socket the runtime asks on (mode 0600)")
	stateDir := flag.String("state-dir", logd.DefaultStateDir(logd.DefaultDir, "nodeagent"), "where each copied container is recorded, for a restarted daemon")
	idle := flag.Duration("idle-exit", 0, "exit after this long without a container or a client (0: never)")
	klog.InitFlags(flag.CommandLine)
	flag.Parse()
	if err := run(*socket, *stateDir, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "containerlogd:", err)
		os.Exit(1)
	}
}

func run(socket, stateDir string, idle time.Duration) error {
	lock, err := logd.Lock(stateDir)
	if err != nil {
		// Another daemon serves these containers: it answers on the socket, and nothing is left to do here.
		klog.InfoS("Not starting", "reason", err)
		return nil
	}
	defer lock.Close()
	d, err := logd.NewDaemon(stateDir, nil)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := d.Load(ctx); err != nil {
		return fmt.Errorf("load %s: %w", stateDir, err)
	}
	ln, err := logd.Listen(socket)
	if err != nil {
		d.Shutdown()
		return fmt.Errorf("listen on %s: %w", socket, err)
	}
	klog.InfoS("Copying container output", "socket", socket, "stateDir", stateDir, "containers", d.Running())
	srv := &logd.Server{Daemon: d, IdleExit: idle}
	return srv.Serve(ctx, ln)
}

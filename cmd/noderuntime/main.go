package main

import (
	"context"
	goflag "flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/runtime"
	"github.com/nodeagent/kubelet/pkg/runtime/host"
)

func main() {
	f := host.Defaults()
	fs := pflag.NewFlagSet("noderuntime", pflag.ContinueOnError)
	fs.SortFlags = false
	f.AddFlags(fs, "")
	fs.StringVar(&f.RootDir, "root-dir", f.RootDir, "Directory of the runtime's state (<root-dir>/runtime) and CNI cache; the kubelet's --root-dir, so that either can take over the other's pods.")
	version := fs.Bool("version", false, "Print the version and exit.")
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "noderuntime serves the built-in container runtime over CRI (for upstream's kubelet, crictl, critest).\n\nUsage:\n  noderuntime [flags]\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "noderuntime:", err)
		os.Exit(2)
	}
	if *version {
		fmt.Printf("noderuntime (runtime %s %s)\n", runtime.Name, runtime.Version)
		return
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "noderuntime: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	if f.Socket == "" {
		fmt.Fprintln(os.Stderr, "noderuntime: --cri-socket is required: serving CRI is all this command does")
		os.Exit(2)
	}
	// containerd's client libraries log through logrus; keep their chatter out of the log.
	logrus.SetLevel(logrus.ErrorLevel)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, f); err != nil {
		fmt.Fprintln(os.Stderr, "noderuntime:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done (SIGTERM, SIGINT) or the socket fails. Containers keep running when it ends.
func run(ctx context.Context, f host.Flags) error {
	logger := klog.FromContext(ctx)
	served, err := host.Start(ctx, f)
	if err != nil {
		return err
	}
	defer served.Stop()
	logger.Info("Serving the built-in runtime over CRI", "socket", f.Socket, "namespace", f.ContainerdNamespace,
		"containerd", f.ContainerdAddress, "version", runtime.Version)
	select {
	case <-ctx.Done():
		logger.Info("Stopping; containers keep running")
		return nil
	case <-served.Failed:
		return served.Err()
	}
}

package main

import (
	"context"
	goflag "flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/runtime"
)

// defaultGCPercent is the kubelet's GOGC unless the environment sets one. Go's default, 100, lets the heap
// grow to twice what is live between collections; at 50 it grows by half. With 110 pods that keeps about 8 MiB
// less resident (about 18 MiB of anonymous memory instead of 26) for 0.1% of a core more at idle (0.45%
// instead of 0.35%), measured on the 2-core host of the README's figures.
const defaultGCPercent = 50

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	opts := defaultOptions()
	fs := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	fs.SortFlags = false
	opts.addFlags(fs)
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "kubelet runs the pods the API server assigns to this node.\n\nUsage:\n  kubelet [flags]\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "kubelet:", err)
		os.Exit(2)
	}
	opts.verbosity = klogFlags.Lookup("v").Value.String()
	if opts.version {
		fmt.Printf("kubelet %s (runtime %s %s)\n", kubeletVersion, runtime.Name, runtime.Version)
		return
	}
	if err := opts.loadConfig(fs); err != nil {
		fmt.Fprintln(os.Stderr, "kubelet:", err)
		os.Exit(2)
	}
	if err := opts.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "kubelet:", err)
		os.Exit(2)
	}
	// containerd's client libraries log through logrus; keep their chatter out of the kubelet's log.
	logrus.SetLevel(logrus.ErrorLevel)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "kubelet:", err)
		os.Exit(1)
	}
}

// kubeletVersion is the Kubernetes version this kubelet speaks, reported in node status.
var kubeletVersion = "v1.35.4"

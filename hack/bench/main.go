// Command bench measures the node agent and prints each figure on its own line as "name: value unit", beside
// a reference measured in the same run, since the machines it runs on are noisy.
//
//	go run ./hack/bench runtime [--rounds N] # built-in runtime vs containerd's CRI plugin: 30 pods serial and parallel
//	go run ./hack/bench apiserver [--kubeconfig F] # 1,000 pods created, watched, listed, patched, deleted
//	go run ./hack/bench cluster [--bin-dir bin] # nodecluster up 3 to Ready, cold and warm, and with kube-apiserver; idle memory
//	go run ./hack/bench logs [--duration 20s] [--pods 110] # log throughput through the log daemon vs containerd's CRI plugin; its memory per pod
//
// The runtime benchmark needs root and a host prepared by hack/setup.sh.
package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench runtime | apiserver | nodeready | kubelet | upstream | cluster | logs [flags]")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var err error
	switch os.Args[1] {
	case "runtime":
		err = benchRuntime(ctx, os.Args[2:])
	case "apiserver":
		err = benchAPIServer(ctx, os.Args[2:])
	case "nodeready":
		err = benchNodeReady(ctx, os.Args[2:])
	case "kubelet":
		err = benchKubelet(ctx, os.Args[2:])
	case "upstream":
		err = benchUpstream(ctx, os.Args[2:])
	case "cluster":
		err = benchCluster(ctx, os.Args[2:])
	case "logs":
		err = benchLogs(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown benchmark %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

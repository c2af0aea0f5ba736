package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench runtime | apiserver | nodeready | kubelet | upstream | dense | cluster | logs | checkpoint | imagevolume [flags]")
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
	case "dense":
		err = benchDense(ctx, os.Args[2:])
	case "upstream":
		err = benchUpstream(ctx, os.Args[2:])
	case "cluster":
		err = benchCluster(ctx, os.Args[2:])
	case "logs":
		err = benchLogs(ctx, os.Args[2:])
	case "checkpoint":
		err = benchCheckpoint(ctx, os.Args[2:])
	case "imagevolume":
		err = benchImageVolume(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown benchmark %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

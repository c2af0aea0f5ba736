package dra_test

import (
	"github.com/nodeagent/kubelet/pkg/dra"
	"github.com/nodeagent/kubelet/pkg/pluginwatcher"
	podsync "github.com/nodeagent/kubelet/pkg/sync"
)

// The manager is the pod sync's DRA and the plugin watcher's handler of DRA drivers.
var (
	_ podsync.DRA           = (*dra.Manager)(nil)
	_ pluginwatcher.Handler = (*dra.Manager)(nil)
)

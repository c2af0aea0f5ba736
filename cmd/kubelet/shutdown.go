package main

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/node"
	"github.com/nodeagent/kubelet/pkg/shutdown"
	podsync "github.com/nodeagent/kubelet/pkg/sync"
)

// startShutdown sets up graceful node shutdown when the configuration asks for it (shutdownGracePeriod or
// shutdownGracePeriodByPodPriority) and systemd-logind can give the time; otherwise it says once why it is
// off and returns nil.
func startShutdown(ctx context.Context, o *options, kl *podsync.Kubelet, agent *node.Agent) *shutdown.Manager {
	logger := klog.FromContext(ctx)
	groups := shutdown.Groups(o.shutdownGracePeriod, o.shutdownGracePeriodCriticalPods, o.shutdownByPriority)
	if len(groups) == 0 {
		return nil
	}
	logind, err := shutdown.ConnectLogind(shutdown.DefaultLogindDropIn)
	if err != nil {
		logger.Info("Graceful node shutdown is off: it needs systemd-logind", "reason", err.Error())
		return nil
	}
	m, err := shutdown.New(shutdown.Config{Logind: logind, Groups: groups, Pods: kl.ActivePods, Kill: kl.ShutdownPod,
		Changed: agent.Resync})
	if err == nil {
		err = m.Start(ctx)
	}
	if err != nil {
		logger.Info("Graceful node shutdown is off", "reason", err.Error())
		return nil
	}
	return m
}

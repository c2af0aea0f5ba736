package main

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/pkg/cgroups"
	"github.com/nodeagent/kubelet/pkg/debugpage"
	"github.com/nodeagent/kubelet/pkg/devicemanager"
	"github.com/nodeagent/kubelet/pkg/dra"
	"github.com/nodeagent/kubelet/pkg/node"
	"github.com/nodeagent/kubelet/pkg/pluginwatcher"
	podsync "github.com/nodeagent/kubelet/pkg/sync"
	"github.com/nodeagent/kubelet/pkg/volume"
)

// debugPage builds the node's debug page from what the kubelet, the PLEG, the node agent, the cgroup
// manager, the device manager, the plugin watcher, the DRA manager and the volume manager hold in memory: no
// runtime or API call.
func debugPage(name string, kl *podsync.Kubelet, agent *node.Agent, cg *cgroups.Manager, driver string, devices *devicemanager.Manager,
	plugins *pluginwatcher.Watcher, claims *dra.Manager, volumes *volume.Manager) func() *debugpage.Page {
	return func() *debugpage.Page {
		h := agent.Health()
		relist, took, stuck := kl.PLEGStatus()
		now := time.Now()
		p := &debugpage.Page{Generated: now, Pods: kl.DebugPods(), Node: debugpage.Node{
			Name: name, Ready: len(h.Failures) == 0, Failures: h.Failures,
			LastRelist: relist, RelistTook: took,
			RuntimeReady: h.RuntimeMessage == "", RuntimeMessage: h.RuntimeMessage,
			NetworkReady: h.NetworkMessage == "", NetworkMessage: h.NetworkMessage,
			APIReachable: h.APIReachable, LastLease: h.LastLease,
			CgroupMode: cg.Mode().String(), CgroupDriver: driver,
		}}
		if len(h.Failures) > 0 {
			p.Node.ReadyMessage = h.Failures[0]
		}
		if off, ok := kl.Offline(); ok {
			p.Node.Offline = &debugpage.Offline{Since: off.Since, Pods: off.Pods}
		}
		for i := range p.Pods {
			uid := types.UID(p.Pods[i].UID)
			if claim, driver, err := claims.Waiting(uid); err != "" {
				p.Pods[i].WaitingFor = fmt.Sprintf("ResourceClaim %s (driver %s): %s", claim, driver, err)
			} else if c, ok := volumes.InFlight(uid); ok {
				p.Pods[i].WaitingFor = fmt.Sprintf("%s of volume %q (CSI driver %s), under way for %v", c.Call, c.Volume, c.Driver,
					now.Sub(c.Since).Round(time.Second))
			}
		}
		for _, r := range devices.Summary() {
			d := debugpage.DeviceResource{Name: r.Name, Plugin: r.Endpoint, Devices: r.Devices, Healthy: r.Healthy, Held: r.Held}
			if r.Endpoint == "" && !r.StoppedAt.IsZero() {
				d.PluginGone = now.Sub(r.StoppedAt)
			}
			p.Node.Devices = append(p.Node.Devices, d)
		}
		for _, r := range plugins.Plugins() {
			p.Node.Plugins = append(p.Node.Plugins, debugpage.Plugin(r))
		}
		for _, s := range stuck {
			p.Node.Stuck = append(p.Node.Stuck, debugpage.Stuck{Pod: s.Namespace + "/" + s.Name, Call: "runtime status call",
				Since: now.Sub(s.Since)})
		}
		return p
	}
}

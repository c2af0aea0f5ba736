// Package pluginwatcher finds the plugins that register with the kubelet through its plugin registration
// directory (<root dir>/plugins_registry), as upstream's plugin manager does: a plugin puts a Unix socket
// there serving pluginregistration.k8s.io/v1's Registration service; the watcher calls GetInfo, hands the
// plugin to the handler of its type (CSIPlugin, DRAPlugin), which validates and registers it, and tells the
// plugin the result with NotifyRegistrationStatus. A socket removed deregisters its plugin; a socket
// replaced (a restarted plugin) registers it again; a restarted kubelet registers every socket it finds.
//
// The watcher decides what to do from the directory alone (plan is a pure function of the sockets found and
// the plugins registered), so a lost filesystem event costs at most one resync period.
package pluginwatcher

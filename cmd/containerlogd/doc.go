// Command containerlogd copies the built-in runtime's containers' output into their CRI log files, apart from
// the kubelet, so that a container never waits on a kubelet that is stopped, restarting or being upgraded.
// See pkg/logd.
//
// The kubelet starts it when none answers on its socket (and again when it goes away); as a systemd service
// (make install) it runs on its own with --idle-exit 0.
package main

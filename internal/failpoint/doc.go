// Package failpoint lets the fault suite (test/e2e) break the kubelet at named points of its work, to check
// what a crash or a hang there leaves behind and what the next start does with it.
//
// The environment variable NODEAGENT_FAILPOINTS lists points, comma-separated, each a name or name=value.
// Hit kills a process that reaches a listed point with SIGKILL, as an OOM kill or a power cut would end it:
// no deferred cleanup runs. HangIf blocks the calling goroutine for good (a wedged shim's ContainerStatus);
// Duration reads a listed duration (a token cache's clock ahead, a shorter crash-loop back-off). Unset
// (always, outside the fault suite), a point costs one boolean check.
package failpoint

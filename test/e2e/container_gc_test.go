//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/internal/failpoint"
	"github.com/nodeagent/kubelet/pkg/runtime/remote"
)

// Dead containers are kept as upstream's container GC keeps them (one dead instance per container beside
// the current one): after five restarts of a crash-looping container the runtime holds exactly two instances
// of it, and `kubectl logs --previous` shows the previous run. The kubelet runs with its crash-loop back-off
// capped at 1 s (a failpoint) so that five restarts take seconds instead of minutes.
func TestDeadContainersKept(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		n.stop()
		n.start(failpoint.EnvVar + "=" + failpoint.CrashBackoffMax + "=1s")
		pod := busyboxPod("crasher", "sh", "-c", `echo "run at $(cat /proc/uptime)"; sleep 1; exit 3`)
		pod.Spec.RestartPolicy = v1.RestartPolicyAlways
		pod = n.createPod(pod)
		n.waitPod("crasher", 180*time.Second, "5 restarts", func(p *v1.Pod) error {
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount < 5 {
				return fmt.Errorf("not yet restarted 5 times: %+v", p.Status.ContainerStatuses)
			}
			return nil
		})
		rt, _, err := remote.Connect(n.criSocket(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "two instances of the container in the runtime", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ctrs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{
				"io.kubernetes.pod.uid": string(pod.UID), "io.kubernetes.container.name": "main"}})
			if err != nil {
				return err
			}
			if len(ctrs) != 2 {
				var attempts []string
				for _, c := range ctrs {
					attempts = append(attempts, fmt.Sprintf("#%d %s", c.GetMetadata().GetAttempt(), c.GetState()))
				}
				return fmt.Errorf("%d instances: %v", len(ctrs), attempts)
			}
			return nil
		})
		eventually(t, 30*time.Second, "logs --previous", func() error {
			out, err := n.client.CoreV1().Pods("default").GetLogs("crasher", &v1.PodLogOptions{Container: "main", Previous: true}).DoRaw(context.Background())
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			if !strings.HasPrefix(string(out), "run at ") {
				return fmt.Errorf("previous logs %q", out)
			}
			return nil
		})
	})
}

//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Container restart rules (ContainerRestartRules, beta and on in 1.35), on both runtime backends: in a
// restartPolicy Never pod, a container whose rule restarts exit code 42 is restarted after exiting 42 and the
// pod then succeeds; exiting with a code no rule names, the container stays exited and the pod fails.
func TestContainerRestartRules(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		// Exits 42 on its first run, then with the code it is given.
		retrying := func(name string, then int) *v1.Pod {
			p := busyboxPod(name, "sh", "-c", fmt.Sprintf(
				`n=$(cat /state/runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > /state/runs; echo run $n; [ $n -eq 1 ] && exit 42; exit %d`, then))
			p.Spec.RestartPolicy = v1.RestartPolicyNever
			never := v1.ContainerRestartPolicyNever
			c := &p.Spec.Containers[0]
			c.RestartPolicy = &never
			c.RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
			p.Spec.Volumes = []v1.Volume{{Name: "state", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			c.VolumeMounts = []v1.VolumeMount{{Name: "state", MountPath: "/state"}}
			return p
		}
		n.createPod(retrying("retried", 0))
		n.createPod(retrying("failed", 3))
		p := n.waitPod("retried", 90*time.Second, "the pod Succeeded after one restart", inPhase(v1.PodSucceeded, ""))
		if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 {
			t.Errorf("the retried container: %+v", cs)
		}
		p = n.waitPod("failed", 90*time.Second, "the pod Failed: exit 3 matches no rule", inPhase(v1.PodFailed, ""))
		if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 3 {
			t.Errorf("the failed container: %+v", cs)
		}
		if out := n.podLogs(t, "failed", "main"); !strings.Contains(out, "run 2") {
			t.Errorf("the failed container's last run: %q", out)
		}
	})
}

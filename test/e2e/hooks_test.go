//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Lifecycle hooks on both runtime backends: a preStop hook runs before the container is told to stop and
// its time counts against the grace period; a sleep preStop holds the stop; a failing postStart hook gives
// FailedPostStartHook and a restart.
func TestKubeletHooks(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		dir := t.TempDir()
		grace := int64(10)
		pre := busyboxPod("prestop", "sh", "-c", "trap 'echo term >> /shared/marker; exit 0' TERM; while true; do sleep 1; done")
		pre.Spec.TerminationGracePeriodSeconds = &grace
		pre.Spec.Volumes = []v1.Volume{{Name: "shared", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}}}}
		pre.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
		pre.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{
			Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo prestop >> /shared/marker; sleep 3"}}}}
		n.createPod(pre)

		sleeper := busyboxPod("prestop-sleep", "sleep", "3600")
		sleeper.Spec.TerminationGracePeriodSeconds = &grace
		sleeper.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 2}}}
		n.createPod(sleeper)

		post := busyboxPod("poststart", "sleep", "3600")
		post.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}
		n.createPod(post)

		n.waitPod("prestop", 60*time.Second, "Ready", ready)
		n.waitPod("prestop-sleep", 60*time.Second, "Ready", ready)
		for _, name := range []string{"prestop", "prestop-sleep"} {
			start := time.Now()
			n.deletePodAndWait(t, name)
			took := time.Since(start)
			least := map[string]time.Duration{"prestop": 3 * time.Second, "prestop-sleep": 2 * time.Second}[name]
			if took < least || took > time.Duration(grace)*time.Second+5*time.Second {
				t.Errorf("%s took %v to go, want its preStop's %v and less than the grace period", name, took, least)
			}
		}
		marker, err := os.ReadFile(filepath.Join(dir, "marker"))
		if err != nil || strings.TrimSpace(string(marker)) != "prestop\nterm" {
			t.Errorf("marker %q (%v), want the preStop hook's line before the stop signal's", marker, err)
		}

		n.waitPod("poststart", 60*time.Second, "restarted after its postStart hook failed", func(p *v1.Pod) error {
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount < 1 {
				return fmt.Errorf("statuses %+v", p.Status.ContainerStatuses)
			}
			return nil
		})
		eventually(t, 10*time.Second, "FailedPostStartHook event", func() error {
			return hasEventLike(n, t, "poststart", "FailedPostStartHook", "PostStartHook failed")
		})
		_ = n.client.CoreV1().Pods("default").Delete(context.Background(), "poststart", metav1.DeleteOptions{})
	})
}

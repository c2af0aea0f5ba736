//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probe is a probe every second with a 3 s timeout: an exec on a 2-core host busy with other tests can take
// more than a second, which is not what these tests are about.
func probe(h v1.ProbeHandler, failureThreshold int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: h, PeriodSeconds: 1, TimeoutSeconds: 3, SuccessThreshold: 1, FailureThreshold: failureThreshold}
}

func execHandler(cmd ...string) v1.ProbeHandler {
	return v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}
}

func notReady(p *v1.Pod) error {
	if ready(p) == nil {
		return fmt.Errorf("Ready")
	}
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
		return fmt.Errorf("not running yet: %s", p.Status.Phase)
	}
	return nil
}

func hasEventLike(n *node, t *testing.T, pod, reason, substr string) error {
	var seen []string
	for _, e := range n.events(t, pod) {
		if e.Reason == reason && strings.Contains(e.Message, substr) {
			return nil
		}
		seen = append(seen, e.Reason+": "+e.Message)
	}
	return fmt.Errorf("no %s event with %q in %v", reason, substr, seen)
}

// Probes as upstream runs them, on both runtime backends: an HTTP readiness probe decides Ready both ways, a
// TCP one too; a failing exec liveness probe restarts the container with a Killing event; a startup probe
// holds a liveness probe back until a slow starter is up; an exec probe that outlives its timeout fails.
func TestKubeletProbes(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		web := busyboxPod("readiness", "sh", "-c",
			"mkdir -p /www; (sleep 6; touch /www/ready; sleep 8; rm /www/ready) & exec httpd -f -p 8080 -h /www")
		web.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		web.Spec.Containers[0].ReadinessProbe = probe(v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}, 1)
		web.Spec.Containers = append(web.Spec.Containers, v1.Container{Name: "tcp", Image: busyboxImage,
			Command:        []string{"sh", "-c", "mkdir -p /w; exec httpd -f -p 9090 -h /w"},
			ReadinessProbe: probe(v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(9090)}}, 1)})
		n.createPod(web)

		live := busyboxPod("liveness", "sh", "-c", "touch /tmp/healthy; sleep 3; rm /tmp/healthy; exec sleep 3600")
		live.Spec.Containers[0].LivenessProbe = probe(execHandler("cat", "/tmp/healthy"), 2)
		n.createPod(live)

		slow := busyboxPod("startup", "sh", "-c", "sleep 6; touch /tmp/started; exec sleep 3600")
		slow.Spec.Containers[0].StartupProbe = probe(execHandler("cat", "/tmp/started"), 30)
		slow.Spec.Containers[0].LivenessProbe = probe(execHandler("cat", "/tmp/started"), 3)
		n.createPod(slow)

		stuck := busyboxPod("timeout", "sleep", "3600")
		stuck.Spec.Containers[0].ReadinessProbe = probe(execHandler("sleep", "5"), 1)
		n.createPod(stuck)

		// Readiness: Running but not Ready until /ready exists, Ready once it does, not Ready once it is gone.
		n.waitPod("readiness", 60*time.Second, "running, not Ready", notReady)
		p := n.waitPod("readiness", 30*time.Second, "Ready after the probe passes", ready)
		for _, cs := range p.Status.ContainerStatuses {
			if !cs.Ready || cs.Started == nil || !*cs.Started {
				t.Errorf("%s: ready %v started %v", cs.Name, cs.Ready, cs.Started)
			}
		}
		n.waitPod("readiness", 30*time.Second, "not Ready once the probe fails", notReady)
		eventually(t, 10*time.Second, "Unhealthy event", func() error {
			return hasEventLike(n, t, "readiness", "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 404")
		})

		// Liveness: restarted, with the reason.
		n.waitPod("liveness", 60*time.Second, "restarted by its liveness probe", func(p *v1.Pod) error {
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount < 1 {
				return fmt.Errorf("statuses %+v", p.Status.ContainerStatuses)
			}
			return nil
		})
		if err := hasEventLike(n, t, "liveness", "Killing", "Container main failed liveness probe, will be restarted"); err != nil {
			t.Error(err)
		}
		if err := hasEventLike(n, t, "liveness", "Unhealthy", "Liveness probe failed: cat: can't open '/tmp/healthy'"); err != nil {
			t.Error(err)
		}

		// Startup: the slow starter comes up without a restart.
		p = n.waitPod("startup", 60*time.Second, "started", ready)
		if cs := p.Status.ContainerStatuses[0]; cs.RestartCount != 0 {
			t.Errorf("the slow starter was restarted %d times", cs.RestartCount)
		}

		// Timeout: never Ready, and the event says why.
		eventually(t, 30*time.Second, "exec probe timeout event", func() error {
			return hasEventLike(n, t, "timeout", "Unhealthy", "timed out")
		})
		if p := n.waitPod("timeout", 10*time.Second, "running", notReady); p.Status.ContainerStatuses[0].Ready {
			t.Error("a probe that times out made the container ready")
		}

		// The probes' metrics, through the API server's node proxy, as upstream serves them.
		data, err := n.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", n.name, "proxy", "metrics", "probes").DoRaw(context.Background())
		if err != nil {
			t.Fatalf("/metrics/probes: %v", err)
		}
		for _, want := range []string{
			`prober_probe_total{container="main",namespace="default",pod="liveness",pod_uid="`,
			`probe_type="Liveness",result="failed"} `,
			`prober_probe_duration_seconds_bucket{container="tcp",namespace="default",pod="readiness",probe_type="Readiness",le="+Inf"} `,
		} {
			if !strings.Contains(string(data), want) {
				t.Errorf("/metrics/probes lacks %q:\n%s", want, data)
			}
		}
	})
}

// Upstream's NodeConformance specs "should be ready immediately after startupProbe succeeds", for an app
// container and for a sidecar (a restartable init container): the container writes its startup file after
// 32 s (longer than the readiness period, so that a worker's first probe spread over its period after a
// kubelet start has passed); its readiness probe, every 30 s, must run as soon as the startup probe passes.
// Upstream's specs allow 25 s between the pod's first app container reporting started and the pod Ready.
func TestKubeletReadyAsSoonAsStarted(t *testing.T) {
	parallel(t)
	n := startNode(t)
	cmd := []string{"sh", "-c", "echo ok >/tmp/health; sleep 32; echo ok >/tmp/startup; exec sleep 600"}
	probed := func(c *v1.Container) {
		c.ReadinessProbe = &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/health"), PeriodSeconds: 30}
		c.StartupProbe = &v1.Probe{ProbeHandler: execHandler("cat", "/tmp/startup"), PeriodSeconds: 5, FailureThreshold: 120}
	}
	app := busyboxPod("startup-app", cmd...)
	probed(&app.Spec.Containers[0])
	sidecar := busyboxPod("startup-sidecar", "sleep", "600")
	always := v1.ContainerRestartPolicyAlways
	sidecar.Spec.InitContainers = []v1.Container{{Name: "sidecar", Image: busyboxImage, Command: cmd, RestartPolicy: &always}}
	probed(&sidecar.Spec.InitContainers[0])
	for _, p := range []*v1.Pod{app, sidecar} {
		n.createPod(p)
	}
	for _, name := range []string{"startup-app", "startup-sidecar"} {
		t.Run(name, func(t *testing.T) {
			n := n.in(t)
			n.waitPod(name, 90*time.Second, "the first app container started", func(p *v1.Pod) error {
				if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].Started == nil || !*p.Status.ContainerStatuses[0].Started {
					return fmt.Errorf("not started: %+v", p.Status.ContainerStatuses)
				}
				return nil
			})
			started := time.Now()
			n.waitPod(name, 60*time.Second, "Ready", ready)
			if in := time.Since(started); in > 10*time.Second {
				t.Errorf("Ready %v after its container started (upstream's spec allows 25 s; the readiness probe should run at once)", in.Round(time.Millisecond))
			} else {
				t.Logf("Ready %v after its container started", in.Round(time.Millisecond))
			}
		})
	}
}

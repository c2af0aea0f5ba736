package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/kubelet/internal/atomicfile"
	"github.com/nodeagent/kubelet/pkg/offline"
)

// benchCheckpoint measures the offline checkpoint's cost at 110 pods: each of them updated (a new
// resourceVersion, as a label change brings) rounds times, the CPU time and bytes written per update, beside
// the floor of the same bytes written the same atomic way without the checkpoint (no JSON, no envelope).
func benchCheckpoint(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("checkpoint", flag.ContinueOnError)
	pods := fs.Int("pods", 110, "pods on the node")
	rounds := fs.Int("rounds", 20, "updates of each pod")
	dir := fs.String("dir", "", "root directory (default: a temporary one under /var/lib/nodeagent, on the disk a kubelet uses)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	root := *dir
	if root == "" {
		if err := os.MkdirAll("/var/lib/nodeagent", 0o755); err != nil {
			return err
		}
		tmp, err := os.MkdirTemp("/var/lib/nodeagent", "bench-checkpoint-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		root = tmp
	}
	s, err := offline.Open(root)
	if err != nil {
		return err
	}
	all := make([]*v1.Pod, *pods)
	for i := range all {
		all[i] = benchCheckpointPod(i)
	}
	before, start := cpuTime(), time.Now()
	for r := 0; r < *rounds; r++ {
		for _, p := range all {
			p.ResourceVersion = fmt.Sprint(r + 1)
			if err := s.PutPod(p); err != nil {
				return err
			}
		}
	}
	updates := *pods * *rounds
	cpu, wall := cpuTime()-before, time.Since(start)
	fi, err := os.Stat(filepath.Join(s.Dir(), "pods", string(all[0].UID)+".json"))
	if err != nil {
		return err
	}

	// The floor: the same bytes, written the same atomic way (temporary file, fsync, rename, directory fsync).
	data, _ := json.Marshal(all[0])
	floorDir := filepath.Join(root, "floor")
	if err := os.MkdirAll(floorDir, 0o700); err != nil {
		return err
	}
	fbefore, fstart := cpuTime(), time.Now()
	for r := 0; r < *rounds; r++ {
		for i := range all {
			if err := atomicfile.Write(filepath.Join(floorDir, fmt.Sprint(i)), data, 0o600); err != nil {
				return err
			}
		}
	}
	fcpu, fwall := cpuTime()-fbefore, time.Since(fstart)
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(updates) }
	figure("checkpoint_pod_update_cpu", per(cpu), "us")
	figure("checkpoint_pod_update_cpu_floor_atomic_write", per(fcpu), "us")
	figure("checkpoint_pod_update_wall", per(wall), "us")
	figure("checkpoint_pod_update_wall_floor_atomic_write", per(fwall), "us")
	figure("checkpoint_pod_file", float64(fi.Size()), "bytes")
	figure("checkpoint_pod_json_floor", float64(len(data)), "bytes")
	return nil
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchCheckpointPod is a pod as a node holds it: a container with resources, environment, a configMap,
// a secret and the projected token volume, a few labels and annotations, a Running status.
func benchCheckpointPod(i int) *v1.Pod {
	name := fmt.Sprintf("web-%03d", i)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
			Labels:      map[string]string{"app": "web", "pod-template-hash": "5d8f7c9b6"},
			Annotations: map[string]string{"kubernetes.io/config.source": "api"}},
		Spec: v1.PodSpec{NodeName: "benchnode", ServiceAccountName: "default",
			Containers: []v1.Container{{Name: "web", Image: "localhost/busybox:1.35", Command: []string{"sleep", "3600"},
				Env:       []v1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")}},
				VolumeMounts: []v1.VolumeMount{{Name: "config", MountPath: "/config"}, {Name: "secret", MountPath: "/secret"},
					{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}}},
			Volumes: []v1.Volume{
				{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "web-config"}}}},
				{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "web-secret"}}},
				{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptrTo(int64(3607))}},
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}}}},
			},
			Tolerations: []v1.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}},
		},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.88.0.5", Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}},
	}
}

func ptrTo[T any](v T) *T { return &v }

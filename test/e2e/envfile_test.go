//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Env files (env[].valueFrom.fileKeyRef, EnvFiles, on in 1.35): an init container writes an env file into an
// emptyDir and the app container's variable is read from it, as upstream's kubelet reads it; a key the file
// lacks keeps the container waiting with CreateContainerConfigError and upstream's message.
func TestKubeletEnvFile(t *testing.T) {
	parallel(t)
	n := startNode(t)
	envFilePod := func(name, key string) *v1.Pod {
		p := busyboxPod(name, "sh", "-c", `echo "GREETING=$GREETING"; exec sleep 3600`)
		p.Spec.Volumes = []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.InitContainers = []v1.Container{{Name: "setup", Image: busyboxImage, Command: []string{"sh", "-c",
			"printf \"# written by setup\\nCONFIG_MAIN='hello from a file'\\nMULTI='a\\nb'\\n\" > /config/app.env"},
			VolumeMounts: []v1.VolumeMount{{Name: "config", MountPath: "/config"}}}}
		p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "GREETING", ValueFrom: &v1.EnvVarSource{
			FileKeyRef: &v1.FileKeySelector{VolumeName: "config", Path: "app.env", Key: key}}}}
		return p
	}
	n.createPod(envFilePod("envfile", "CONFIG_MAIN"))
	n.waitPod("envfile", 60*time.Second, "the pod ready", ready)
	if out := n.podLogs(t, "envfile", "main"); strings.TrimSpace(out) != "GREETING=hello from a file" {
		t.Errorf("the variable from the env file: %q", out)
	}

	n.createPod(envFilePod("envfile-missing", "NOT_THERE"))
	n.waitPod("envfile-missing", 60*time.Second, "the container waiting on the missing key", func(p *v1.Pod) error {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" &&
				strings.Contains(w.Message, `environment variable key "NOT_THERE" not found in file "app.env"`) {
				return nil
			}
		}
		return fmt.Errorf("statuses %+v", p.Status.ContainerStatuses)
	})
}

//go:build e2e

package e2e

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// podLogs returns the logs of the pod's container.
func (n *node) podLogs(t *testing.T, pod, container string) string {
	t.Helper()
	var out string
	eventually(t, 30*time.Second, "the container's log", func() error {
		b, err := n.client.CoreV1().Pods("default").GetLogs(pod, &v1.PodLogOptions{Container: container}).Do(context.Background()).Raw()
		if err != nil {
			return err
		}
		if len(b) == 0 {
			return errors.New("empty log")
		}
		out = string(b)
		return nil
	})
	return out
}

// A pod with runAsUser runs as that user, pause container included, on both runtime backends.
func TestKubeletNonRootPod(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		p := busyboxPod("nonroot", "sh", "-c", "id; exec sleep 3600")
		uid, gid := int64(1001), int64(2002)
		p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &gid}
		n.createPod(p)
		n.waitPod("nonroot", 60*time.Second, "the non-root pod ready", ready)
		if out := n.podLogs(t, "nonroot", "main"); !strings.HasPrefix(out, "uid=1001 gid=2002") {
			t.Errorf("id in the pod: %q", out)
		}
	})
}

// envFrom brings a ConfigMap's and a Secret's keys into the environment, with and without a prefix, on both
// runtime backends.
func TestKubeletEnvFrom(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		ctx := context.Background()
		if _, err := n.client.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"COLOR": "blue", "SIZE": "L"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer n.client.CoreV1().ConfigMaps("default").Delete(ctx, "cfg", metav1.DeleteOptions{})
		if _, err := n.client.CoreV1().Secrets("default").Create(ctx, &v1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "creds"}, Data: map[string][]byte{"TOKEN": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer n.client.CoreV1().Secrets("default").Delete(ctx, "creds", metav1.DeleteOptions{})
		p := busyboxPod("envfrom", "sh", "-c", "echo color=$COLOR size=$SIZE app_color=$APP_COLOR token=$TOKEN; exec sleep 3600")
		p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{
			{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
			{Prefix: "APP_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
			{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}}},
		}
		n.createPod(p)
		n.waitPod("envfrom", 60*time.Second, "the pod ready", ready)
		if out := n.podLogs(t, "envfrom", "main"); out != "color=blue size=L app_color=blue token=s3cret\n" {
			t.Errorf("env in the pod: %q", out)
		}
	})
}

// A completed init container is reported ready, as upstream reports it.
func TestKubeletCompletedInitContainerIsReady(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		p := busyboxPod("initready", "sleep", "3600")
		p.Spec.InitContainers = []v1.Container{{Name: "init", Image: busyboxImage, Command: []string{"true"}}}
		n.createPod(p)
		got := n.waitPod("initready", 60*time.Second, "the pod ready", ready)
		if len(got.Status.InitContainerStatuses) != 1 {
			t.Fatalf("init statuses %+v", got.Status.InitContainerStatuses)
		}
		st := got.Status.InitContainerStatuses[0]
		if st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 || !st.Ready {
			t.Errorf("completed init container: ready %v, state %+v", st.Ready, st.State)
		}
	})
}

// An HTTPS postStart hook reaches a server whose certificate the kubelet cannot verify (pods serve
// self-signed ones): as upstream, the kubelet does not verify it.
func TestKubeletHTTPSHookSkipsVerification(t *testing.T) {
	parallel(t)
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/started" {
			hits.Add(1)
		}
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	portNum, _ := strconv.Atoi(port)
	forEachRuntime(t, func(t *testing.T, n *node) {
		before := hits.Load()
		p := busyboxPod("httpshook", "sleep", "3600")
		p.Spec.HostNetwork = true
		p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{
			Host: "127.0.0.1", Port: intstr.FromInt32(int32(portNum)), Path: "/started", Scheme: v1.URISchemeHTTPS,
		}}}
		n.createPod(p)
		n.waitPod("httpshook", 60*time.Second, "the pod ready", ready)
		if hits.Load() == before {
			t.Error("the HTTPS hook never reached the server")
		}
		got := n.waitPod("httpshook", time.Second, "", func(*v1.Pod) error { return nil })
		if cs := got.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 0 {
			t.Errorf("container restarted after its hook: %+v", cs)
		}
	})
}

// The pod's /etc/hosts is the kubelet's: localhost lines, the pod's IP and hostname, then hostAliases; a
// host-network pod gets the node's file with its aliases.
func TestKubeletEtcHosts(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		n.restartWith("--cluster-domain", "cluster.local")
		p := busyboxPod("hosts", "sh", "-c", "cat /etc/hosts; exec sleep 3600")
		p.Spec.Hostname, p.Spec.Subdomain = "web", "svc" // FQDN under --cluster-domain
		p.Spec.HostAliases = []v1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"db", "db.local"}}}
		n.createPod(p)
		got := n.waitPod("hosts", 60*time.Second, "the pod ready", ready)
		out := n.podLogs(t, "hosts", "main")
		for _, want := range []string{
			"# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n",
			got.Status.PodIP + "\tweb.svc.default.svc.cluster.local\tweb\n",
			"\n# Entries added by HostAliases.\n10.1.2.3\tdb\tdb.local\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("/etc/hosts lacks %q:\n%s", want, out)
			}
		}
		h := busyboxPod("hosts-hostnet", "sh", "-c", "cat /etc/hosts; exec sleep 3600")
		h.Spec.HostNetwork = true
		h.Spec.HostAliases = []v1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"db"}}}
		n.createPod(h)
		n.waitPod("hosts-hostnet", 60*time.Second, "the pod ready", ready)
		node, _ := os.ReadFile("/etc/hosts")
		if out := n.podLogs(t, "hosts-hostnet", "main"); out != "# Kubernetes-managed hosts file (host network).\n"+string(node)+
			"\n# Entries added by HostAliases.\n10.1.2.3\tdb\n" {
			t.Errorf("host-network /etc/hosts:\n%s", out)
		}
	})
}

// Containers get the service variables of their namespace's Services, and always those of the kubernetes
// Service, as upstream computes them; $(VAR) references expand against them; enableServiceLinks: false
// leaves only the kubernetes Service's.
func TestKubeletServiceEnv(t *testing.T) {
	parallel(t)
	forEachRuntime(t, func(t *testing.T, n *node) {
		ctx := context.Background()
		svc, err := n.client.CoreV1().Services("default").Create(ctx, &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web-front"},
			Spec: v1.ServiceSpec{Ports: []v1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)},
				{Name: "metrics", Port: 9090, Protocol: v1.ProtocolUDP},
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer n.client.CoreV1().Services("default").Delete(ctx, "web-front", metav1.DeleteOptions{})
		kube, err := n.client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the kubelet's watch of Services delivers the new one
		show := "echo host=$WEB_FRONT_SERVICE_HOST port=$WEB_FRONT_SERVICE_PORT metrics=$WEB_FRONT_SERVICE_PORT_METRICS " +
			"link=$WEB_FRONT_PORT udp=$WEB_FRONT_PORT_9090_UDP_ADDR:$WEB_FRONT_PORT_9090_UDP_PORT/$WEB_FRONT_PORT_9090_UDP_PROTO " +
			"kube=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT url=$URL; exec sleep 3600"
		links := busyboxPod("svc-links", "sh", "-c", show)
		links.Spec.Containers[0].Env = []v1.EnvVar{{Name: "URL", Value: "http://$(WEB_FRONT_SERVICE_HOST):$(WEB_FRONT_SERVICE_PORT)/"}}
		off := false
		noLinks := busyboxPod("svc-nolinks", "sh", "-c", show)
		noLinks.Spec.EnableServiceLinks = &off
		n.createPod(links)
		n.createPod(noLinks)
		ip := svc.Spec.ClusterIP
		kubeVars := "kube=" + kube.Spec.ClusterIP + ":" + strconv.Itoa(int(kube.Spec.Ports[0].Port))
		for pod, want := range map[string]string{
			"svc-links": "host=" + ip + " port=80 metrics=9090 link=tcp://" + ip + ":80 udp=" + ip + ":9090/udp " +
				kubeVars + " url=http://" + ip + ":80/\n",
			"svc-nolinks": "host= port= metrics= link= udp=:/ " + kubeVars + " url=\n",
		} {
			n.waitPod(pod, 60*time.Second, pod+" ready", ready)
			if out := n.podLogs(t, pod, "main"); out != want {
				t.Errorf("%s: %q, want %q", pod, out, want)
			}
		}
	})
}

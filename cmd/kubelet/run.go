package main

import (
	"context"
	"fmt"
	"net"
	"os"
	goruntime "runtime"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cri "k8s.io/cri-api/pkg/apis"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/pkg/kubeclient"
	"github.com/nodeagent/kubelet/pkg/runtime"
	"github.com/nodeagent/kubelet/pkg/runtime/host"
	"github.com/nodeagent/kubelet/pkg/runtime/remote"
	"github.com/nodeagent/kubelet/pkg/server"
)

// run builds the kubelet's pieces and runs them until ctx is done.
func run(ctx context.Context, o *options) error {
	logger := klog.FromContext(ctx)
	nodeName, err := o.nodeName()
	if err != nil {
		return err
	}
	for _, d := range []string{o.rootDir, o.podLogsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	shareRootDir(ctx, o.rootDir)
	creds, err := nodeCredentials(ctx, o)
	if err != nil {
		return err
	}

	rt, images, streaming, closeRuntime, err := startRuntime(ctx, o)
	if err != nil {
		return err
	}
	defer closeRuntime()

	restCfg, clientCA, apiChild, err := startAPI(ctx, o, nodeName)
	if err != nil {
		return err
	}
	// A standalone node's API server that ends on its own is started again, with a back-off; pods keep
	// running meanwhile, and the node's Ready condition says so (apiserverHealth). The child is stopped
	// after the node's loops, whose shutdown may still write through it.
	var apiserverHealth func() error
	if apiChild != nil {
		sup := superviseAPIServer(o, nodeName, restCfg, apiChild)
		supCtx, supCancel := context.WithCancel(ctx)
		supervised := make(chan struct{})
		go func() { sup.Run(supCtx); close(supervised) }()
		defer func() {
			supCancel()
			<-supervised
			sup.Stop(ctx)
		}()
		apiserverHealth = sup.Check
	}
	clients, err := newClients(restCfg, o)
	if err != nil {
		return err
	}

	logger.Info("Kubelet started", "node", nodeName, "apiserver", restCfg.Host)
	builtin, _ := rt.(*runtime.Runtime)
	return runNode(ctx, o, nodeDeps{
		name: nodeName, clients: clients, clientCA: clientCA, apiserverHealth: apiserverHealth,
		runtime: rt, images: images, streaming: streaming, builtin: builtin, credentials: creds,
	})
}

// startRuntime connects to the remote CRI runtime, or starts the built-in one and serves it on the CRI socket.
func startRuntime(ctx context.Context, o *options) (cri.RuntimeService, cri.ImageManagerService, server.StreamingRuntime, func(), error) {
	if o.runtimeEndpoint != "" {
		rs, is, err := remote.Connect(o.runtimeEndpoint, remote.DefaultTimeout)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if _, err := rs.Version(ctx, "v1"); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("--container-runtime-endpoint %s does not answer: %w", o.runtimeEndpoint, err)
		}
		return rs, is, nil, func() {}, nil
	}
	f := o.builtin
	f.RootDir = o.rootDir
	size, err := o.logMaxSize()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	// The log daemon keeps the rotation limits while the kubelet is down; the log manager then only links.
	f.LogMaxSize, f.LogMaxFiles = size, o.containerLogMaxFiles
	served, err := host.Start(ctx, f)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if f.Socket != "" {
		klog.FromContext(ctx).Info("Serving the built-in runtime over CRI", "socket", f.Socket)
	}
	rt := served.Runtime
	return rt, rt, rt.Streamer(), served.Stop, nil
}

// startAPI returns the kubelet's API client configuration and the CA bundle that authenticates callers of
// its endpoint: from --kubeconfig (and --client-ca-file; without it no client certificate is accepted, as
// upstream's kubelet), or from the
// lightweight API server started as a child process for a standalone node, which writes the admin kubeconfig.
// The child is nil for --kubeconfig.
func startAPI(ctx context.Context, o *options, nodeName string) (*rest.Config, []byte, *childAPIServer, error) {
	if o.kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--kubeconfig %s: %w", o.kubeconfig, err)
		}
		ca, err := clientCA(o)
		if err != nil {
			return nil, nil, nil, err
		}
		if ca == nil {
			klog.FromContext(ctx).Info("No --client-ca-file: the kubelet's endpoint accepts no client certificate, only bearer tokens the API server reviews; kubectl logs, exec and port-forward through the API server need --client-ca-file naming the CA of its kubelet client certificate")
		}
		return cfg, ca, nil, nil
	}
	cfg, child, err := startChildAPIServer(ctx, o, nodeName)
	if err != nil {
		return nil, nil, nil, err
	}
	// The endpoint trusts the server's own CA, whatever --client-ca-file says: the server's proxy (kubectl logs
	// and exec) authenticates with a certificate it signs.
	ca := cfg.CAData
	fmt.Printf("Standalone node %q: API server at %s (pid %d)\n", nodeName, cfg.Host, child.cmd.Process.Pid)
	fmt.Printf("Admin kubeconfig: %s\n  kubectl --kubeconfig %s get pods\n", o.adminKubeconfig, o.adminKubeconfig)
	return cfg, ca, child, nil
}

// clientCA is the bundle of --client-ca-file (authentication.x509.clientCAFile), nil without one: a node
// joined to a cluster accepts client certificates only of the CA it is told to, as upstream's kubelet, not
// of whatever CA signed the API server's serving certificate.
func clientCA(o *options) ([]byte, error) {
	if o.clientCAFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(o.clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("--client-ca-file: %w", err)
	}
	return b, nil
}

// localAddress is where a process on this host reaches a server listening on addr.
func localAddress(addr string) string {
	if ip := net.ParseIP(addr); ip == nil || ip.IsUnspecified() {
		return "127.0.0.1"
	}
	return addr
}

// apiClients are the kubelet's API clients, split so that a burst of one kind of request never delays
// another: pods and their status (--kube-api-qps/--kube-api-burst), events (--event-qps/--event-burst), the
// node's heartbeat (its status and Lease; never rate-limited, so that a busy node is not declared dead), as
// upstream splits them, and the endpoint's token and access reviews (--kube-api-qps/--kube-api-burst of
// their own, so that callers of the endpoint cannot slow the pods' requests).
type apiClients struct {
	pods, events, heartbeat, reviews kubeclient.Interface
}

// newClients builds the three clients from cfg. A cfg with a negative QPS (a standalone node's own API
// server) is not rate-limited at all.
func newClients(cfg *rest.Config, o *options) (apiClients, error) {
	build := func(what string, qps float32, burst int) (kubeclient.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.UserAgent = fmt.Sprintf("kubelet/%s (%s/%s) nodeagent/%s", kubeletVersion, goruntime.GOOS, goruntime.GOARCH, runtime.Version)
		if cfg.QPS >= 0 {
			c.QPS, c.Burst = qps, burst
		}
		cs, err := kubeclient.New(c)
		if err != nil {
			return nil, fmt.Errorf("API client for %s: %w", what, err)
		}
		return cs, nil
	}
	var cs apiClients
	var err error
	if cs.pods, err = build("pods", o.kubeAPIQPS, o.kubeAPIBurst); err != nil {
		return cs, err
	}
	if cs.events, err = build("events", o.eventQPS, o.eventBurst); err != nil {
		return cs, err
	}
	if cs.reviews, err = build("reviews", o.kubeAPIQPS, o.kubeAPIBurst); err != nil {
		return cs, err
	}
	cs.heartbeat, err = build("the node heartbeat", -1, 0)
	return cs, err
}

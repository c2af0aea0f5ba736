package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/nodeagent/kubelet/test/csidriver"
)

// options are the command's flags.
type options struct {
	endpoint        string
	registrationDir string
	kubeletPath     string
	cfg             csidriver.Config
}

func main() {
	var o options
	flag.StringVar(&o.endpoint, "endpoint", "unix:///csi/csi.sock", "the CSI endpoint the driver serves (unix:///path)")
	flag.StringVar(&o.cfg.NodeID, "node-id", "", "the node's ID, as NodeGetInfo reports it (required)")
	flag.StringVar(&o.cfg.DriverName, "driver-name", csidriver.DefaultDriverName, "the driver's name")
	flag.StringVar(&o.cfg.StateDir, "state-dir", "/csi-data-dir", "where the volumes and their records live")
	flag.Int64Var(&o.cfg.MaxVolumesPerNode, "max-volumes-per-node", 0, "the volume limit NodeGetInfo reports (0: none)")
	flag.StringVar(&o.registrationDir, "registration-dir", "", "the kubelet's plugins_registry directory as mounted here; empty: do not register")
	flag.StringVar(&o.kubeletPath, "kubelet-registration-path", "", "the CSI socket's path as the kubelet sees it on the host (required with --registration-dir)")
	klog.InitFlags(flag.CommandLine)
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "csi-hostpath:", err)
		os.Exit(1)
	}
}

// run serves until SIGTERM or SIGINT (nil), or until the kubelet refuses the registration (an error: the
// process exits non-zero, as node-driver-registrar does, and its restart registers again). The sockets are
// removed either way.
func run(o options) error {
	if o.cfg.NodeID == "" {
		return errors.New("--node-id is required")
	}
	if o.registrationDir != "" && o.kubeletPath == "" {
		return errors.New("--kubelet-registration-path is required with --registration-dir")
	}
	d, err := csidriver.New(o.cfg)
	if err != nil {
		return err
	}
	csiSocket, err := csidriver.SocketPath(o.endpoint)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	csiLn, err := listen(csiSocket)
	if err != nil {
		return err
	}
	defer removeSocket(csiSocket)
	var reg *csidriver.Registrar
	var regLn net.Listener
	if o.registrationDir != "" {
		reg = csidriver.NewRegistrar(d.Name(), o.kubeletPath)
		regSocket := csidriver.RegistrationSocketPath(o.registrationDir, d.Name())
		if regLn, err = listen(regSocket); err != nil {
			csiLn.Close()
			return err
		}
		defer removeSocket(regSocket)
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.Serve(gctx, csiLn) })
	if reg != nil {
		g.Go(func() error { return reg.Serve(gctx, regLn) })
		g.Go(func() error {
			select {
			case err := <-reg.Failed():
				return err
			case <-gctx.Done():
				return nil
			}
		})
	}
	klog.InfoS("Serving", "driver", d.Name(), "node", o.cfg.NodeID, "endpoint", csiSocket, "registrationDir", o.registrationDir)
	err = g.Wait()
	klog.InfoS("Stopped", "driver", d.Name(), "err", err)
	return err
}

func listen(socket string) (net.Listener, error) {
	ln, err := csidriver.ListenUnix(socket)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", socket, err)
	}
	return ln, nil
}

func removeSocket(socket string) {
	if err := csidriver.RemoveSocket(socket); err != nil {
		klog.ErrorS(err, "Could not remove the socket", "socket", socket)
	}
}

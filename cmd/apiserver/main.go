// Command apiserver runs the lightweight Kubernetes API server on its own.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodeagent/kubelet/pkg/apiserver"
)

func main() {
	var cfg apiserver.Config
	var kubeconfig string
	flag.StringVar(&cfg.DataDir, "data-dir", "/var/lib/nodeagent/apiserver", "directory for the store and generated certificates")
	flag.StringVar(&cfg.BindAddress, "bind-address", "127.0.0.1", "address to listen on")
	flag.IntVar(&cfg.Port, "secure-port", apiserver.DefaultPort, "port to listen on (0 picks a free one)")
	flag.StringVar(&cfg.TokenFile, "token-auth-file", "", "static bearer tokens: token,user,uid,\"group1,group2\" per line")
	flag.StringVar(&cfg.CACertFile, "client-ca-file", "", "CA certificate (default <data-dir>/pki/ca.crt, generated)")
	flag.StringVar(&cfg.CAKeyFile, "client-ca-key-file", "", "CA key (default <data-dir>/pki/ca.key, generated)")
	flag.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "serving certificate (default issued by the CA)")
	flag.StringVar(&cfg.TLSKeyFile, "tls-private-key-file", "", "serving key")
	flag.StringVar(&kubeconfig, "admin-kubeconfig", "", "write an admin kubeconfig here (default <data-dir>/admin.kubeconfig)")
	flag.Parse()
	if err := run(cfg, kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "apiserver:", err)
		os.Exit(1)
	}
}

func run(cfg apiserver.Config, kubeconfig string) error {
	if kubeconfig == "" {
		kubeconfig = cfg.DataDir + "/admin.kubeconfig"
	}
	s, err := apiserver.New(cfg)
	if err != nil {
		return err
	}
	if err := s.WriteAdminKubeconfig(kubeconfig); err != nil {
		_ = s.Stop()
		return err
	}
	fmt.Printf("serving on %s; admin kubeconfig: %s\n", s.URL(), kubeconfig)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return s.Run(ctx)
}

package apiserver

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodeagent/kubelet/internal/atomicfile"
	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
)

// AdminUser is the name of the admin identity in issued kubeconfigs.
const AdminUser = "kubernetes-admin"

// clientCertValidity is how long issued client certificates are valid.
const clientCertValidity = 365 * 24 * time.Hour

// ClientConfig returns a client configuration for user in groups,
// authenticated by a client certificate the server's CA signs now.
func (s *Server) ClientConfig(user string, groups []string) (*rest.Config, error) {
	certPEM, keyPEM, err := s.ca.Issue(user, groups, nil, s.cfg.Clock.Now(), clientCertValidity)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: s.url,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: s.ca.CertPEM, CertData: certPEM, KeyData: keyPEM,
		},
		QPS: -1,
	}, nil
}

// AdminClientConfig returns a client configuration for the admin identity
// (group system:masters).
func (s *Server) AdminClientConfig() (*rest.Config, error) {
	return s.ClientConfig(AdminUser, []string{auth.GroupMasters})
}

// NodeClientConfig returns a client configuration for system:node:<nodeName>
// in group system:nodes.
func (s *Server) NodeClientConfig(nodeName string) (*rest.Config, error) {
	return s.ClientConfig(auth.NodeUserPrefix+nodeName, []string{auth.GroupNodes})
}

// WriteAdminKubeconfig writes a kubeconfig for the admin identity to path
// (mode 0600), creating its directory.
func (s *Server) WriteAdminKubeconfig(path string) error {
	cfg, err := s.AdminClientConfig()
	if err != nil {
		return err
	}
	return WriteKubeconfig(path, cfg, AdminUser)
}

// WriteKubeconfig writes cfg as a kubeconfig whose user entry is named user, atomically and with mode 0600
// (it holds a private key or token), replacing any file at path; a reader waiting for it never reads half.
func WriteKubeconfig(path string, cfg *rest.Config, user string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["nodeagent"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		Token: cfg.BearerToken}
	kc.Contexts["nodeagent"] = &clientcmdapi.Context{Cluster: "nodeagent", AuthInfo: user}
	kc.CurrentContext = "nodeagent"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create kubeconfig dir: %w", err)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

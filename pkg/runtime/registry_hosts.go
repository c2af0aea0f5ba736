package runtime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/core/remotes/docker/config"
	"github.com/containerd/log"
	"github.com/sirupsen/logrus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// registryHosts is the host configuration of one pull: containerd's own loader of a certs.d directory
// (`<dir>/<host>/hosts.toml`, or docker's `*.crt`, `*.cert` and `*.key` files), as containerd's CRI plugin
// and `ctr --hosts-dir` read it: mirrors tried in order before the registry itself, plain HTTP, private CAs,
// client certificates, headers and override_path. Without a directory for a host, the registry is
// contacted over HTTPS (plain HTTP is tried for localhost).
//
// containerd's loader logs a hosts.toml it cannot parse and goes on as if the file were not there, which
// would send the pull to the registry a mirror was configured to replace; here the pull fails instead, with
// the file and containerd's reason.
func registryHosts(ctx context.Context, hostsDir string, auth *runtimeapi.AuthConfig) docker.RegistryHosts {
	opts := config.HostOptions{
		Credentials: func(host string) (string, string, error) { return credentials(auth, host) },
	}
	if hostsDir == "" {
		return config.ConfigureHosts(ctx, opts)
	}
	opts.HostDir = config.HostDirFromRoot(hostsDir)
	seen := &loaderErrors{}
	logger := logrus.New()
	logger.SetOutput(logrus.StandardLogger().Out)
	logger.SetLevel(logrus.ErrorLevel)
	logger.AddHook(seen)
	hosts := config.ConfigureHosts(log.WithLogger(ctx, logrus.NewEntry(logger)), opts)
	return func(host string) ([]docker.RegistryHost, error) {
		out, err := hosts(host)
		if err == nil {
			err = seen.take()
		}
		if err != nil {
			dir, _ := opts.HostDir(host)
			if dir == "" {
				dir = hostsDir
			}
			return nil, fmt.Errorf("registry host configuration %s: %w", filepath.Join(dir, "hosts.toml"), err)
		}
		return out, nil
	}
}

// loaderErrors keeps the errors containerd's host loader logs instead of returning.
type loaderErrors struct {
	mu   sync.Mutex
	errs []error
}

func (l *loaderErrors) Levels() []logrus.Level {
	return []logrus.Level{logrus.PanicLevel, logrus.FatalLevel, logrus.ErrorLevel}
}

func (l *loaderErrors) Fire(e *logrus.Entry) error {
	err, _ := e.Data[logrus.ErrorKey].(error)
	if err == nil {
		err = errors.New(e.Message)
	}
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
	return nil
}

func (l *loaderErrors) take() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := errors.Join(l.errs...)
	l.errs = nil
	return err
}

// Package e2e holds the end-to-end tests: real containerd, runc, CNI plugins and cgroups on this host, as
// root. They build only with the e2e tag (`make test-e2e`), and fail rather than skip when the host is not
// set up: `make setup` (hack/setup.sh) prepares it.
package e2e

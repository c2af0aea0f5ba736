package server

import (
	"net/http"
	"strings"
)

// Paths of the endpoint whose authorization differs from the default (nodes/proxy), as upstream's kubelet
// names them.
const (
	statsPath       = "/stats/"
	metricsPath     = "/metrics"
	logsPath        = "/logs/"
	checkpointPath  = "/checkpoint/"
	statuszPath     = "/statusz"
	flagzPath       = "/flagz"
	podsPath        = "/pods"
	runningPodsPath = "/runningpods/"
	healthzPath     = "/healthz"
	configzPath     = "/configz"
)

// requestAttributes returns the verb and the subresources of `nodes` that a request to the endpoint needs, as
// upstream's kubelet computes them with fine-grained authorization (on by default since 1.33): the caller must
// be allowed one of the subresources, tried in order. Everything without a subresource of its own (exec,
// attach, portForward, run, containerLogs, pprof) needs nodes/proxy; /pods, /runningpods, /healthz and
// /configz are also allowed with nodes/proxy, which was all they needed before fine-grained authorization.
func requestAttributes(method, path string) (verb string, subresources []string) {
	switch method {
	case http.MethodPost:
		verb = "create"
	case http.MethodGet:
		verb = "get"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	switch {
	case isSubpath(path, podsPath), isSubpath(path, runningPodsPath):
		subresources = append(subresources, "pods")
	case isSubpath(path, healthzPath):
		subresources = append(subresources, "healthz")
	case isSubpath(path, configzPath):
		subresources = append(subresources, "configz")
	}
	switch {
	case isSubpath(path, statsPath):
		subresources = append(subresources, "stats")
	case isSubpath(path, metricsPath):
		subresources = append(subresources, "metrics")
	case isSubpath(path, logsPath):
		subresources = append(subresources, "log")
	case isSubpath(path, checkpointPath):
		subresources = append(subresources, "checkpoint")
	case isSubpath(path, statuszPath):
		subresources = append(subresources, "statusz")
	case isSubpath(path, flagzPath):
		subresources = append(subresources, "configz")
	default:
		subresources = append(subresources, "proxy")
	}
	return verb, subresources
}

// isSubpath reports whether subpath is path or lies below it ("/stats/summary" below "/stats/", "/statsx" not).
func isSubpath(subpath, path string) bool {
	path = strings.TrimSuffix(path, "/")
	return subpath == path || strings.HasPrefix(subpath, path) && subpath[len(path)] == '/'
}

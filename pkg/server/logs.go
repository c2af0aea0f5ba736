package server

import (
	"bufio"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nodeagent/kubelet/pkg/volume"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// followInterval is how often a followed log is checked for new lines.
const followInterval = 250 * time.Millisecond

// httpError is an error with the HTTP status it is answered with.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &httpError{code: code, msg: fmt.Sprintf(format, args...)}
}

// parseLogOptions reads the query of /containerLogs as v1.PodLogOptions (follow, tailLines or the older
// tail, previous, timestamps, sinceSeconds, sinceTime, limitBytes) and validates it as upstream does.
func parseLogOptions(q url.Values, now time.Time) (logOptions, bool, error) {
	opts := logOptions{tail: -1, limitBytes: -1}
	var previous bool
	boolean := func(name string, dst *bool) error {
		v := q.Get(name)
		if v == "" {
			return nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errorf(http.StatusBadRequest, "invalid %s %q", name, v)
		}
		*dst = b
		return nil
	}
	integer := func(name string, dst *int64) (bool, error) {
		v := q.Get(name)
		if v == "" {
			return false, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return false, errorf(http.StatusBadRequest, "invalid %s %q", name, v)
		}
		*dst = n
		return true, nil
	}
	for name, dst := range map[string]*bool{"follow": &opts.follow, "previous": &previous, "timestamps": &opts.timestamps} {
		if err := boolean(name, dst); err != nil {
			return opts, false, err
		}
	}
	if t := q.Get("tail"); t != "" && q.Get("tailLines") == "" && t != "all" {
		q = cloneWith(q, "tailLines", t)
	}
	if set, err := integer("tailLines", &opts.tail); err != nil {
		return opts, false, err
	} else if set && opts.tail < 0 {
		return opts, false, errorf(http.StatusUnprocessableEntity, "tailLines must be greater than or equal to 0")
	}
	if set, err := integer("limitBytes", &opts.limitBytes); err != nil {
		return opts, false, err
	} else if set && opts.limitBytes < 1 {
		return opts, false, errorf(http.StatusUnprocessableEntity, "limitBytes must be greater than 0")
	}
	var since int64
	sinceSet, err := integer("sinceSeconds", &since)
	if err != nil {
		return opts, false, err
	}
	if sinceSet {
		if since < 1 {
			return opts, false, errorf(http.StatusUnprocessableEntity, "sinceSeconds must be greater than 0")
		}
		opts.since = now.Add(-time.Duration(since) * time.Second)
	}
	if st := q.Get("sinceTime"); st != "" {
		if sinceSet {
			return opts, false, errorf(http.StatusUnprocessableEntity, "at most one of sinceTime or sinceSeconds may be specified")
		}
		t, err := time.Parse(time.RFC3339, st)
		if err != nil {
			return opts, false, errorf(http.StatusBadRequest, "invalid sinceTime %q", st)
		}
		opts.since = t
	}
	return opts, previous, nil
}

func cloneWith(q url.Values, k, v string) url.Values {
	out := url.Values{}
	for key, vals := range q {
		out[key] = vals
	}
	out.Set(k, v)
	return out
}

// containerStatus returns the status of the named container (app, init or ephemeral), and whether the pod
// declares such a container at all.
func containerStatus(pod *v1.Pod, name string) (*v1.ContainerStatus, bool) {
	declared := false
	for _, c := range pod.Spec.Containers {
		declared = declared || c.Name == name
	}
	for _, c := range pod.Spec.InitContainers {
		declared = declared || c.Name == name
	}
	for _, c := range pod.Spec.EphemeralContainers {
		declared = declared || c.Name == name
	}
	for _, list := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses,
		pod.Status.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i], declared
			}
		}
	}
	return nil, declared
}

// safeName refuses names that could leave the log directory.
func safeName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}

// logPath returns the log file of a container: <logsDir>/<ns>_<pod>_<uid>/<container>/<n>.log, where n is
// the restart count in the pod's status (less one for the previous container). Errors carry the HTTP
// status to answer with, and upstream's words.
func logPath(logsDir string, pod *v1.Pod, container string, previous bool) (string, error) {
	st, declared := containerStatus(pod, container)
	if !declared {
		return "", errorf(http.StatusNotFound, "container %q not found in pod %q", container, pod.Name)
	}
	if !safeName(pod.Namespace) || !safeName(pod.Name) || !safeName(string(pod.UID)) || !safeName(container) {
		return "", errorf(http.StatusBadRequest, "invalid pod or container name")
	}
	waiting := func() error {
		reason := "ContainerCreating"
		if st != nil && st.State.Waiting != nil && st.State.Waiting.Reason != "" {
			reason = st.State.Waiting.Reason
		}
		return errorf(http.StatusBadRequest, "container %q in pod %q is waiting to start: %s", container, pod.Name, reason)
	}
	if st == nil {
		return "", waiting()
	}
	n := int64(st.RestartCount)
	if previous {
		if n == 0 {
			return "", errorf(http.StatusBadRequest, "previous terminated container %q in pod %q not found", container, pod.Name)
		}
		n--
	}
	dir := filepath.Join(volume.PodLogDir(logsDir, pod.Namespace, pod.Name, pod.UID), container)
	path := filepath.Join(dir, strconv.FormatInt(n, 10)+".log")
	if _, err := os.Stat(path); err != nil {
		if previous {
			return "", errorf(http.StatusBadRequest, "previous terminated container %q in pod %q not found", container, pod.Name)
		}
		if st.State.Waiting != nil {
			return "", waiting()
		}
		return "", errorf(http.StatusNotFound, "log of container %q in pod %q not found", container, pod.Name)
	}
	return path, nil
}

// containerRunning says whether the container instance with the given restart count is running, by the
// pod's latest status.
func containerRunning(pod *v1.Pod, container string, restartCount int32) bool {
	st, _ := containerStatus(pod, container)
	return st != nil && st.RestartCount == restartCount && st.State.Running != nil
}

// serveContainerLogs serves GET /containerLogs/{namespace}/{pod}/{container}.
func (s *Server) serveContainerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, previous, err := parseLogOptions(r.URL.Query(), s.cfg.Clock.Now())
	if err != nil {
		writeError(w, err)
		return
	}
	pod, ok := s.cfg.Pods(ns, name)
	if !ok {
		writeError(w, errorf(http.StatusNotFound, "pod %q does not exist", name))
		return
	}
	path, err := logPath(s.cfg.LogsDir, pod, container, previous)
	if err != nil {
		writeError(w, err)
		return
	}
	var f *follower
	if opts.follow && !previous {
		st, _ := containerStatus(pod, container)
		restarts := st.RestartCount
		f = &follower{clock: s.cfg.Clock, interval: followInterval, running: func() bool {
			cur, ok := s.cfg.Pods(ns, name)
			return ok && cur.UID == pod.UID && containerRunning(cur, container, restarts)
		}}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	out := &logOut{buf: bufio.NewWriterSize(w, 32<<10)}
	if fl, ok := w.(http.Flusher); ok && f != nil {
		out.flusher = fl
	}
	err = readLog(r.Context(), path, opts, out, f)
	if err != nil && !out.wrote {
		writeError(w, errorf(http.StatusInternalServerError, "%v", err))
		return
	}
	_ = out.buf.Flush()
	if err != nil {
		klog.FromContext(r.Context()).V(2).Info("Container log stream ended", "pod", klog.KRef(ns, name),
			"container", container, "err", err.Error())
	}
}

// logOut buffers a log response; when following, the reader flushes it each time it has caught up with the
// log, so that lines reach the caller at once without a flush per line (a chatty container writes 100,000
// lines a second).
type logOut struct {
	buf     *bufio.Writer
	flusher http.Flusher
	wrote   bool
}

func (o *logOut) Write(p []byte) (int, error) {
	o.wrote = true
	return o.buf.Write(p)
}

// Flush sends what is buffered to the caller.
func (o *logOut) Flush() error {
	if err := o.buf.Flush(); err != nil {
		return err
	}
	if o.flusher != nil {
		o.flusher.Flush()
	}
	return nil
}

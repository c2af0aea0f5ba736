package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// podTimes is what the benchmark saw of one pod, in its own clock.
type podTimes struct {
	created    time.Time     // the create call was sent
	createCall time.Duration // how long the create call took
	bound      time.Time     // first watch event with spec.nodeName set (placed by the API server)
	ready      time.Time     // first watch event with Ready=True
	terminated time.Time     // first watch event with the container terminated
	message    string        // its termination message
	deleteSent time.Time
	gone       time.Time // DELETED event
}

// podWatch follows the pods of one namespace and records when each reached each state. It resumes a watch
// that ends from the last resource version it saw.
type podWatch struct {
	client kubernetes.Interface
	ns     string
	// alive, when set, is asked while waiting; an error ends the wait (the kubelet exited).
	alive func() error

	mu   sync.Mutex
	pods map[string]*podTimes
}

func newPodWatch(client kubernetes.Interface, ns string) *podWatch {
	return &podWatch{client: client, ns: ns, pods: map[string]*podTimes{}}
}

// start lists the namespace and follows it until ctx is done.
func (w *podWatch) start(ctx context.Context) error {
	list, err := w.client.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	rv := list.ResourceVersion
	go func() {
		for ctx.Err() == nil {
			wi, err := w.client.CoreV1().Pods(w.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				_ = sleepCtx(ctx, 200*time.Millisecond)
				continue
			}
			rv = w.follow(wi, rv)
			wi.Stop()
		}
	}()
	return nil
}

func (w *podWatch) follow(wi watch.Interface, rv string) string {
	for ev := range wi.ResultChan() {
		now := time.Now()
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		rv = pod.ResourceVersion
		if ev.Type == watch.Bookmark {
			continue
		}
		w.mu.Lock()
		t := w.entry(pod.Name)
		if ev.Type == watch.Deleted {
			if t.gone.IsZero() {
				t.gone = now
			}
		} else {
			if t.bound.IsZero() && pod.Spec.NodeName != "" {
				t.bound = now
			}
			if t.ready.IsZero() {
				if c := readyCondition(pod); c != nil && c.Status == corev1.ConditionTrue {
					t.ready = now
				}
			}
			if t.terminated.IsZero() {
				for _, cs := range pod.Status.ContainerStatuses {
					if cs.State.Terminated != nil {
						t.terminated, t.message = now, cs.State.Terminated.Message
					}
				}
			}
		}
		w.mu.Unlock()
	}
	return rv
}

func (w *podWatch) entry(name string) *podTimes {
	t, ok := w.pods[name]
	if !ok {
		t = &podTimes{}
		w.pods[name] = t
	}
	return t
}

func readyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// mark records a client-side moment of a pod (create or delete sent).
func (w *podWatch) mark(name string, f func(*podTimes)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w.entry(name))
}

// times returns a copy of what was recorded of the named pods.
func (w *podWatch) times(names []string) []podTimes {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]podTimes, 0, len(names))
	for _, n := range names {
		out = append(out, *w.entry(n))
	}
	return out
}

// waitAll waits until cond holds for every named pod, or timeout.
func (w *podWatch) waitAll(ctx context.Context, names []string, what string, timeout time.Duration, cond func(*podTimes) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		missing := 0
		for _, n := range names {
			if !cond(w.entry(n)) {
				missing++
			}
		}
		w.mu.Unlock()
		if missing == 0 {
			return nil
		}
		if w.alive != nil {
			if err := w.alive(); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pods not %s after %v", missing, len(names), what, timeout)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// messageTime parses the termination message the exit pods write: adjtimex's seconds, sub-seconds and
// clock status, the sub-seconds nanoseconds when the status has STA_NANO, else microseconds.
func messageTime(msg string) (time.Time, bool) {
	f := strings.Fields(msg)
	if len(f) != 3 {
		return time.Time{}, false
	}
	var v [3]int64
	for i := range f {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || n < 0 {
			return time.Time{}, false
		}
		v[i] = n
	}
	const staNano = 0x2000
	sub := v[1] * int64(time.Microsecond)
	if v[2]&staNano != 0 {
		sub = v[1]
	}
	if v[0] == 0 || sub >= int64(time.Second) {
		return time.Time{}, false
	}
	return time.Unix(v[0], sub), true
}

// benchPodSpec is a busybox pod bound to node, with a 2 s termination grace period.
func benchPodSpec(name, node, group string, restart corev1.RestartPolicy, cmd ...string) *corev1.Pod {
	grace := int64(2)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench-group": group}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			RestartPolicy:                 restart,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "main", Image: busyboxImage, Command: cmd,
				ImagePullPolicy:          corev1.PullIfNotPresent,
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
		},
	}
}

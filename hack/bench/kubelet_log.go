package main

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"time"
)

// podStages are the moments the kubelet's log (at -v 3) shows for one pod's start.
type podStages struct {
	sandboxCall time.Time // RunPodSandbox called ("Running pod sandbox")
	sandbox     time.Time // RunPodSandbox returned ("Started pod sandbox")
	created     time.Time // CreateContainer returned ("Created container")
	started     time.Time // StartContainer returned ("Started container")
	// The first status patch that made the pod Ready: when it was sent and when the API answered.
	readySent, readyWritten time.Time
	// A container's exit announced by the runtime ("Container exited", -v 2), and the first status patch
	// that made the pod terminal: sent and answered.
	exited                        time.Time
	terminalSent, terminalWritten time.Time
}

var (
	klogHeader     = regexp.MustCompile(`^[IWE](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6})`)
	logSandboxCall = regexp.MustCompile(`"Running pod sandbox" pod="[^/]+/([^"]+)"`)
	logSandbox     = regexp.MustCompile(`"Started pod sandbox" pod="[^/]+/([^"]+)"`)
	logCreated     = regexp.MustCompile(`"Created container" pod="[^/]+/([^"]+)"`)
	logStarted     = regexp.MustCompile(`"Started container" pod="[^/]+/([^"]+)"`)
	logReady       = regexp.MustCompile(`"Patched pod status" pod="[^/]+/([^"]+)" phase="[^"]*" ready=true took="([^"]+)"`)
	logExited      = regexp.MustCompile(`"Container exited" pod="[^/]+/([^"]+)"`)
	logTerminal    = regexp.MustCompile(`"Patched pod status" pod="[^/]+/([^"]+)" phase="(?:Succeeded|Failed)" ready=\w+ took="([^"]+)"`)
)

// readStages reads the kubelet's log and returns the stages of every pod it names.
func readStages(path string) map[string]*podStages {
	out := map[string]*podStages{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	year := time.Now().Year()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		h := klogHeader.FindStringSubmatch(line)
		if h == nil {
			continue
		}
		n := func(i int) int { v, _ := strconv.Atoi(h[i]); return v }
		at := time.Date(year, time.Month(n(1)), n(2), n(3), n(4), n(5), n(6)*1000, time.Local)
		for _, m := range []struct {
			re  *regexp.Regexp
			set func(*podStages, []string)
		}{
			{logSandboxCall, func(s *podStages, _ []string) { s.sandboxCall = at }},
			{logSandbox, func(s *podStages, _ []string) { s.sandbox = at }},
			{logCreated, func(s *podStages, _ []string) { s.created = at }},
			{logStarted, func(s *podStages, _ []string) { s.started = at }},
			{logReady, func(s *podStages, g []string) { firstPatch(&s.readySent, &s.readyWritten, at, g[2]) }},
			{logExited, func(s *podStages, _ []string) {
				if s.exited.IsZero() {
					s.exited = at
				}
			}},
			{logTerminal, func(s *podStages, g []string) { firstPatch(&s.terminalSent, &s.terminalWritten, at, g[2]) }},
		} {
			if g := m.re.FindStringSubmatch(line); g != nil {
				s := out[g[1]]
				if s == nil {
					s = &podStages{}
					out[g[1]] = s
				}
				m.set(s, g)
			}
		}
	}
	return out
}

// firstPatch sets when a status patch was sent and answered, from its log line's time (answered) and its
// "took", unless an earlier patch set them.
func firstPatch(sent, written *time.Time, at time.Time, took string) {
	d, err := time.ParseDuration(took)
	if written.IsZero() && err == nil {
		*sent, *written = at.Add(-d), at
	}
}

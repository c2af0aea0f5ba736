package podsync

import (
	"bytes"
	"io"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Upstream's limits for termination messages.
const (
	maxMessageFileBytes = 4096
	maxMessageLogBytes  = 2048
	maxMessageLogLines  = 80
)

// enrichTermination adds the termination message to an exited container's status: the file the container
// wrote at its terminationMessagePath, or with FallbackToLogsOnError and a failure, the tail of its log.
// The PLEG calls it on every exited container it inspects.
func enrichTermination(cs *runtimeapi.ContainerStatus) {
	if cs == nil || cs.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		return
	}
	msg := ""
	if path := cs.Annotations[annotationContainerLogMessage]; path != "" {
		msg = readHead(path, maxMessageFileBytes)
	}
	fallback := cs.Annotations[annotationTerminationPolicy] == string(v1.TerminationMessageFallbackToLogsOnError) &&
		cs.ExitCode != 0 && cs.Reason != "ContainerCannotRun"
	if msg == "" && fallback && cs.LogPath != "" {
		msg = tailCRILog(cs.LogPath, maxMessageLogLines, maxMessageLogBytes)
	}
	if msg == "" {
		return
	}
	if cs.Message != "" {
		cs.Message += ": "
	}
	cs.Message += msg
}

func readHead(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return string(b)
}

// tailCRILog returns the last lines of a CRI-format log ("<time> <stream> <P|F> <text>"), at most maxLines
// lines and maxBytes bytes of text.
func tailCRILog(path string, maxLines, maxBytes int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const window = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		if _, err := f.Seek(fi.Size()-window, io.SeekStart); err != nil {
			return ""
		}
	}
	raw, err := io.ReadAll(io.LimitReader(f, window))
	if err != nil {
		return ""
	}
	var out bytes.Buffer
	for _, line := range strings.Split(string(raw), "\n") {
		parts := strings.SplitN(line, " ", 4)
		if len(parts) < 3 {
			continue
		}
		text := ""
		if len(parts) == 4 {
			text = parts[3]
		}
		out.WriteString(text)
		if parts[2] != "P" {
			out.WriteByte('\n')
		}
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	s := strings.Join(lines, "\n")
	if len(s) > maxBytes {
		s = s[len(s)-maxBytes:]
	}
	return s
}

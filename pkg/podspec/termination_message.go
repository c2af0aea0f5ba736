package podspec

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// Upstream's limits for termination messages.
const (
	maxMessageFileBytes = 4096
	maxMessageLogBytes  = 2048
	maxMessageLogLines  = 80
)

// LogTailWindow is how much of the end of a container's log TerminationFiles.LogTail must return at least.
const LogTailWindow = 64 << 10

// TerminationMessageFile is the host file a container instance's terminationMessagePath is mounted from:
// <pod dir>/containers/<name>/<restart count>-termination-log.
func TerminationMessageFile(podDir, container string, restartCount int32) string {
	return filepath.Join(podDir, "containers", container, strconv.Itoa(int(restartCount))+"-termination-log")
}

// TerminationFiles reads what a termination message is made of; the caller does the I/O.
type TerminationFiles struct {
	// Head is the first n bytes of the file at path; "" when it cannot be read.
	Head func(path string, n int64) string
	// LogTail is the last LogTailWindow bytes of the log at path, or all of it when shorter; nil when it
	// cannot be read.
	LogTail func(path string) []byte
}

// EnrichTermination adds the termination message to an exited container's status: the file the container
// wrote at its terminationMessagePath (recorded in its annotations), or with FallbackToLogsOnError and a
// failure, the tail of its log. Files are read only when needed.
func EnrichTermination(cs *runtimeapi.ContainerStatus, files TerminationFiles) {
	if cs == nil || cs.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		return
	}
	msg := ""
	if path := cs.Annotations[podfacts.AnnotationTerminationMessageHostPath]; path != "" {
		msg = files.Head(path, maxMessageFileBytes)
	}
	fallback := cs.Annotations[podfacts.AnnotationTerminationMessagePolicy] == string(v1.TerminationMessageFallbackToLogsOnError) &&
		cs.ExitCode != 0 && cs.Reason != "ContainerCannotRun"
	if msg == "" && fallback && cs.LogPath != "" {
		if raw := files.LogTail(cs.LogPath); raw != nil {
			msg = criLogTail(raw, maxMessageLogLines, maxMessageLogBytes)
		}
	}
	if msg == "" {
		return
	}
	if cs.Message != "" {
		cs.Message += ": "
	}
	cs.Message += msg
}

// criLogTail returns the last lines of the text of a CRI-format log ("<time> <stream> <P|F> <text>"), at
// most maxLines lines and maxBytes bytes of text.
func criLogTail(raw []byte, maxLines, maxBytes int) string {
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

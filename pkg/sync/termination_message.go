package podsync

import (
	"io"
	"os"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/kubelet/pkg/podspec"
)

// enrichTermination adds the termination message to an exited container's status (podspec.EnrichTermination),
// reading the files it names. The PLEG calls it on every exited container it inspects.
func enrichTermination(cs *runtimeapi.ContainerStatus) {
	podspec.EnrichTermination(cs, podspec.TerminationFiles{Head: readHead, LogTail: readTail})
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

// readTail returns the last podspec.LogTailWindow bytes of a file; nil when it cannot be read.
func readTail(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	const window = podspec.LogTailWindow
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		if _, err := f.Seek(fi.Size()-window, io.SeekStart); err != nil {
			return nil
		}
	}
	raw, err := io.ReadAll(io.LimitReader(f, window))
	if err != nil {
		return nil
	}
	return raw
}

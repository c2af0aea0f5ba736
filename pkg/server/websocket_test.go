package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientexec "k8s.io/client-go/util/exec"

	"github.com/nodeagent/kubelet/pkg/runtime"
)

func TestWriteExitStatus(t *testing.T) {
	for _, tt := range []struct {
		name         string
		err          error
		status       string
		reason, code string
	}{
		{"success", nil, metav1.StatusSuccess, "", ""},
		{"built-in runtime's exit", &runtime.ExitError{Code: 3}, metav1.StatusFailure, "NonZeroExitCode", "3"},
		{"remote runtime's exit", clientexec.CodeExitError{Err: errors.New("x"), Code: 7}, metav1.StatusFailure, "NonZeroExitCode", "7"},
		{"other error", errors.New("container not running"), metav1.StatusFailure, "InternalError", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeExitStatus(&b, tt.err); err != nil {
				t.Fatal(err)
			}
			var st metav1.Status
			if err := json.Unmarshal(b.Bytes(), &st); err != nil {
				t.Fatalf("%q: %v", b.String(), err)
			}
			if st.Status != tt.status || string(st.Reason) != tt.reason {
				t.Errorf("status %s reason %s, want %s %s", st.Status, st.Reason, tt.status, tt.reason)
			}
			if tt.code != "" && (st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != "ExitCode" || st.Details.Causes[0].Message != tt.code) {
				t.Errorf("details %+v, want exit code %s", st.Details, tt.code)
			}
		})
	}
}

package apiserver

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

// SnapshotPath serves a snapshot of the store to admins (system:masters), for `apiserver snapshot save`: a
// serving server holds its bbolt file locked, so no other process can read it meanwhile. The copy is a bbolt
// read transaction's, consistent, holding every write acknowledged before the request; it is written to a
// file beside the store first, so that the answer carries its length and a failed copy is an error status,
// never a short body.
const SnapshotPath = "/snapshot"

func (s *Server) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	u := request.UserFrom(r.Context())
	if u == nil || !u.InGroup(auth.GroupMasters) {
		name := ""
		if u != nil {
			name = u.Name
		}
		rest.WriteError(w, apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf(
			"user %q cannot get path %q: only members of %s may take snapshots", name, SnapshotPath, auth.GroupMasters)))
		return
	}
	if r.Method != http.MethodGet {
		rest.WriteError(w, apierrors.NewMethodNotSupported(schema.GroupResource{}, r.Method))
		return
	}
	f, err := os.CreateTemp(s.cfg.DataDir, "snapshot-*.db")
	if err != nil {
		rest.WriteError(w, apierrors.NewInternalError(err))
		return
	}
	defer os.Remove(f.Name())
	defer f.Close()
	n, err := s.store.Backup(f)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		rest.WriteError(w, apierrors.NewInternalError(fmt.Errorf("snapshot: %w", err)))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f)
}

package apiserver

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/apiserver/auth"
	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
)

// nodeProxy forwards pods' log/exec/attach/portforward and nodes/proxy to the
// node's kubelet endpoint.
type nodeProxy struct {
	store *storage.Store
	ca    *auth.CA
	clock clock.PassiveClock
}

func newNodeProxy(store *storage.Store, ca *auth.CA, clk clock.PassiveClock) *nodeProxy {
	return &nodeProxy{store: store, ca: ca, clock: clk}
}

func (p *nodeProxy) ServeProxy(w http.ResponseWriter, r *http.Request, info *request.Info) {
	rest.WriteError(w, apierrors.NewServiceUnavailable("proxying to nodes is not implemented yet"))
}

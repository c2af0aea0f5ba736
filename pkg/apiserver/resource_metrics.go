package apiserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/resourcemetrics"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

// newResourceMetrics scrapes the kubelets' /metrics/resource for metrics.k8s.io, through the node proxy's
// address choice and client certificate.
func newResourceMetrics(x objectIndex, nodes *nodeProxy) *resourcemetrics.Scraper {
	return resourcemetrics.New(resourcemetrics.Config{
		Nodes: func() []*corev1.Node { return listObjects[corev1.Node](x, "nodes/") },
		Pods: func(ns string) []*corev1.Pod {
			prefix := "pods/"
			if ns != "" {
				prefix += ns + "/"
			}
			return listObjects[corev1.Pod](x, prefix)
		},
		Fetch: func(ctx context.Context, n *corev1.Node) (io.ReadCloser, error) {
			loc, err := nodes.location(n)
			if err != nil {
				return nil, err
			}
			loc.Path = "/metrics/resource"
			transport, err := nodes.transport(false)
			if err != nil {
				return nil, err
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
			if err != nil {
				return nil, err
			}
			req.Header.Set("Accept", "text/plain")
			resp, err := (&http.Client{Transport: transport}).Do(req)
			if err != nil {
				return nil, err
			}
			if resp.StatusCode != http.StatusOK {
				resp.Body.Close()
				return nil, fmt.Errorf("kubelet answered %s", resp.Status)
			}
			return resp.Body, nil
		},
	})
}

// listObjects decodes the objects under prefix as Ts.
func listObjects[T any](x objectIndex, prefix string) []*T {
	objs, _ := x.store.List(prefix)
	out := make([]*T, 0, len(objs))
	for _, o := range objs {
		if obj, err := x.codec.Decode(o.Key, o.Raw); err == nil {
			if t, ok := any(obj).(*T); ok {
				out = append(out, t)
			}
		}
	}
	return out
}

// serveResourceMetrics answers a metrics.k8s.io request: get and list of nodes and pods.
func (s *Server) serveResourceMetrics(w http.ResponseWriter, r *http.Request, info *request.Info) {
	if info.Version != resourcemetrics.Version || info.Subresource != "" {
		rest.WriteError(w, apierrors.NewNotFound(schema.GroupResource{Group: info.Group, Resource: info.Resource}, info.Name))
		return
	}
	if info.Verb != "get" && info.Verb != "list" {
		rest.WriteError(w, apierrors.NewMethodNotSupported(schema.GroupResource{Group: info.Group, Resource: info.Resource}, info.Verb))
		return
	}
	s.metrics.Serve(w, resourcemetrics.Request{Resource: info.Resource, Namespace: info.Namespace, Name: info.Name,
		LabelSelector: strings.TrimSpace(r.URL.Query().Get("labelSelector"))})
}

package dra

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
)

// fakeDriver is a DRA driver's kubelet plugin service: it records the claims of each call and answers one
// device per claim, with the CDI ID <driver>/test=<claim name>, unless told to fail.
type fakeDriver struct {
	drapbv1.UnimplementedDRAPluginServer
	name string

	mu        sync.Mutex
	prepared  [][]string // claim names, per NodePrepareResources
	unprepare [][]string
	// failClaim maps a claim name to the error its prepare result carries.
	failClaim map[string]string
	// skip leaves the claims out of the answer.
	skip bool
	// hang blocks NodePrepareResources until the call's context ends.
	hang bool
	// unknownUID adds a result for a claim that was not asked for.
	unknownUID bool
	// health, when set, is served too (registering it with the health service is up to the test).
	health *fakeHealth
}

func (d *fakeDriver) NodePrepareResources(ctx context.Context, req *drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error) {
	d.mu.Lock()
	d.prepared = append(d.prepared, claimNames(req.Claims))
	hang, skip, unknown := d.hang, d.skip, d.unknownUID
	d.mu.Unlock()
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	resp := &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{}}
	if unknown {
		resp.Claims["no-such-uid"] = &drapbv1.NodePrepareResourceResponse{}
	}
	if skip {
		return resp, nil
	}
	for _, c := range req.Claims {
		d.mu.Lock()
		msg := d.failClaim[c.Name]
		d.mu.Unlock()
		if msg != "" {
			resp.Claims[c.Uid] = &drapbv1.NodePrepareResourceResponse{Error: msg}
			continue
		}
		resp.Claims[c.Uid] = &drapbv1.NodePrepareResourceResponse{Devices: []*drapbv1.Device{{
			RequestNames: []string{"req"}, PoolName: "pool", DeviceName: "dev-" + c.Name,
			CdiDeviceIds: []string{d.name + "/test=" + c.Name}}}}
	}
	return resp, nil
}

func (d *fakeDriver) NodeUnprepareResources(_ context.Context, req *drapbv1.NodeUnprepareResourcesRequest) (*drapbv1.NodeUnprepareResourcesResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unprepare = append(d.unprepare, claimNames(req.Claims))
	resp := &drapbv1.NodeUnprepareResourcesResponse{Claims: map[string]*drapbv1.NodeUnprepareResourceResponse{}}
	for _, c := range req.Claims {
		resp.Claims[c.Uid] = &drapbv1.NodeUnprepareResourceResponse{}
	}
	return resp, nil
}

func (d *fakeDriver) calls() (prepared, unprepared [][]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][]string{}, d.prepared...), append([][]string{}, d.unprepare...)
}

func (d *fakeDriver) set(f func(d *fakeDriver)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

func claimNames(claims []*drapbv1.Claim) []string {
	out := make([]string, 0, len(claims))
	for _, c := range claims {
		out = append(out, c.Name)
	}
	return out
}

// serve serves the driver on a Unix socket in dir, as v1.DRAPlugin or (v1beta1) v1beta1.DRAPlugin only, and
// returns the socket's path.
func serve(t *testing.T, d *fakeDriver, dir string, v1beta1 bool) string {
	t.Helper()
	sock := filepath.Join(dir, d.name+".sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	if v1beta1 {
		drapbv1beta1.RegisterDRAPluginServer(srv, drapbv1beta1.V1ServerWrapper{DRAPluginServer: d})
	} else {
		drapbv1.RegisterDRAPluginServer(srv, d)
	}
	if d.health != nil {
		drahealthv1alpha1.RegisterDRAResourceHealthServer(srv, d.health)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return sock
}

// fakeHealth is a driver's DRAResourceHealth service: each NodeWatchResources stream sends the reports the
// test puts in reports, until the test breaks it (a value on breaks) or the kubelet ends it.
type fakeHealth struct {
	drahealthv1alpha1.UnimplementedDRAResourceHealthServer
	reports chan *drahealthv1alpha1.NodeWatchResourcesResponse
	breaks  chan struct{}

	mu             sync.Mutex
	opened, active int
}

func newFakeHealth() *fakeHealth {
	return &fakeHealth{reports: make(chan *drahealthv1alpha1.NodeWatchResourcesResponse), breaks: make(chan struct{})}
}

func (h *fakeHealth) NodeWatchResources(_ *drahealthv1alpha1.NodeWatchResourcesRequest, stream drahealthv1alpha1.DRAResourceHealth_NodeWatchResourcesServer) error {
	h.mu.Lock()
	h.opened++
	h.active++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.active--
		h.mu.Unlock()
	}()
	for {
		select {
		case r := <-h.reports:
			if err := stream.Send(r); err != nil {
				return err
			}
		case <-h.breaks:
			return status.Error(codes.Unavailable, "broken on purpose")
		case <-stream.Context().Done():
			return nil
		}
	}
}

// streams returns how many streams were opened and how many are open.
func (h *fakeHealth) streams() (opened, active int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.opened, h.active
}

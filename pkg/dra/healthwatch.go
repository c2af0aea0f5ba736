package dra

import (
	"context"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
)

// healthService is the gRPC service of device health a driver may offer besides its plugin service,
// "v1alpha1.DRAResourceHealth"; it is in the versions the driver registers with.
var healthService = drahealthv1alpha1.DRAResourceHealth_ServiceDesc.ServiceName

// defaultHealthBackoff spaces the attempts to open a driver's health stream again after it broke: 1 s
// doubling with jitter, at most 30 s apart (upstream retries every 5 s). A stream that delivered a report
// starts over at 1 s.
var defaultHealthBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Cap: 30 * time.Second, Steps: 1 << 30}

// offersHealth says whether a driver's registered versions include the health service.
func offersHealth(versions []string) bool { return slices.Contains(versions, healthService) }

// startHealth starts watching the health of an endpoint's devices, until stopHealth or the end of Run
// (after which it starts nothing, so that Run's wait for the streams is final). Call it with pluginsMu held.
func (m *Manager) startHealth(p *plugin) {
	if m.bg.Err() != nil {
		return
	}
	m.health.watch(p.driver)
	ctx, cancel := context.WithCancel(m.bg)
	p.healthCancel = cancel
	m.healthWG.Add(1)
	go func() {
		defer m.healthWG.Done()
		defer cancel()
		m.watchHealth(ctx, p)
	}()
}

// stopHealth stops an endpoint's health stream, if it has one. When no other endpoint of the driver watches
// health, the driver's devices become Unknown: it returns those that were not, for notifyHealth (not to be
// called under pluginsMu). Call it with pluginsMu held, after p left m.plugins.
func (m *Manager) stopHealth(p *plugin) []deviceKey {
	if p.healthCancel == nil {
		return nil
	}
	p.healthCancel() // before forget: the stream's reports are dropped from now on
	if slices.ContainsFunc(m.plugins[p.driver], func(o *plugin) bool { return o.healthCancel != nil }) {
		return nil
	}
	return m.health.forget(p.driver, time.Now())
}

// watchHealth keeps a NodeWatchResources stream open to the endpoint until ctx ends, opening it again with
// a back-off whenever it breaks.
func (m *Manager) watchHealth(ctx context.Context, p *plugin) {
	logger := klog.FromContext(ctx).WithValues("driver", p.driver, "endpoint", p.endpoint)
	client := drahealthv1alpha1.NewDRAResourceHealthClient(p.conn)
	backoff := m.healthBackoff
	for {
		reported, err := m.streamHealth(ctx, client, p.driver)
		if ctx.Err() != nil {
			logger.V(4).Info("Stopped watching the health of DRA devices")
			return
		}
		if reported {
			backoff = m.healthBackoff
		}
		delay := backoff.Step()
		logger.V(3).Info("The health stream of a DRA driver ended, opening it again", "err", err, "delay", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			logger.V(4).Info("Stopped watching the health of DRA devices")
			return
		case <-t.C:
		}
	}
}

// streamHealth opens one stream and records its reports until it breaks or ctx ends; reported says whether
// it delivered any.
func (m *Manager) streamHealth(ctx context.Context, client drahealthv1alpha1.DRAResourceHealthClient, driver string) (reported bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // releases the stream
	stream, err := client.NodeWatchResources(ctx, &drahealthv1alpha1.NodeWatchResourcesRequest{})
	if err != nil {
		return false, err
	}
	live := func() bool { return ctx.Err() == nil }
	for {
		resp, err := stream.Recv()
		if err != nil {
			return reported, err
		}
		reported = true
		changed := m.health.update(driver, resp.GetDevices(), time.Now(), live)
		klog.FromContext(ctx).V(5).Info("DRA device health reported", "driver", driver, "devices", len(resp.GetDevices()), "changed", len(changed))
		m.notifyHealth(changed)
	}
}

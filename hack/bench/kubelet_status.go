package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// statusPaths are the endpoint's paths that monitoring scrapes, measured with 110 pods.
var statusPaths = []string{"/stats/summary", "/metrics", "/metrics/resource", "/metrics/cadvisor", "/pods", "/debug/pods"}

// runStatus measures the status endpoint with 110 pods: each path's latency asked directly of the kubelet
// (p50, p99 of 100 requests, and the size of the answer), what a gathering of the node's and pods' usage
// costs (its duration over its 10 s interval, an upper bound of its CPU share), and a container writing
// 10 MiB/s for 20 s against the default 10 MiB rotation, followed as `kubectl logs -f` follows it: lines
// written against lines read.
func (b *kubeletBench) runStatus(ctx context.Context) error {
	pods := names("status", 110)
	progress("kubelet: 110 pods at 10/s")
	if err := b.create(ctx, pods, 100*time.Millisecond, corev1.RestartPolicyAlways, func(int) []string { return []string{"sleep", "3600"} }); err != nil {
		return err
	}
	if err := b.watch.waitAll(ctx, pods, "Ready", 5*time.Minute, func(t *podTimes) bool { return !t.ready.IsZero() }); err != nil {
		return err
	}
	client, err := b.endpointClient()
	if err != nil {
		return err
	}
	// Two gatherings and a measure of every pod's directories.
	if err := sleepCtx(ctx, 25*time.Second); err != nil {
		return err
	}
	for _, path := range statusPaths {
		var lat []time.Duration
		size := 0
		for i := 0; i < 100; i++ {
			t0 := time.Now()
			n, err := getAll(ctx, client, fmt.Sprintf("https://127.0.0.1:%d%s", b.kl.port, path))
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			lat = append(lat, time.Since(t0))
			size = n
		}
		name := "kubelet_endpoint_110pods" + strings.NewReplacer("/", "_").Replace(path)
		figure(name+"_p50", ms(percentile(lat, 50)), "ms")
		figure(name+"_p99", ms(percentile(lat, 99)), "ms")
		figure(name+"_size", float64(size)/1024, "KiB")
	}
	// The gatherings' CPU (counted on their own thread) over an idle window, beside the kubelet's whole.
	cpu0, err := b.metric(ctx, client, "nodeagent_stats_gathering_cpu_seconds_total")
	if err != nil {
		return err
	}
	sum0, n0, err := b.histogram(ctx, client, "nodeagent_stats_gathering_duration_seconds")
	if err != nil {
		return err
	}
	t0 := time.Now()
	stopPprof := b.pprof(ctx, "kubelet_idle_110pods_stats") // with --pprof: where the idle CPU goes
	err = b.idleWindow(ctx, "110pods_stats")
	stopPprof()
	if err != nil {
		return err
	}
	cpu1, err := b.metric(ctx, client, "nodeagent_stats_gathering_cpu_seconds_total")
	if err != nil {
		return err
	}
	sum1, n1, err := b.histogram(ctx, client, "nodeagent_stats_gathering_duration_seconds")
	if err != nil {
		return err
	}
	if n1 <= n0 {
		return fmt.Errorf("no stats gathering in the idle window")
	}
	figure("kubelet_stats_gathering_110pods_duration_mean", (sum1-sum0)/(n1-n0)*1000, "ms")
	figure("kubelet_stats_gathering_110pods_cpu_mean", (cpu1-cpu0)/(n1-n0)*1000, "ms-cpu")
	figure("kubelet_stats_gathering_110pods_cpu", (cpu1-cpu0)/time.Since(t0).Seconds()*100, "%core")
	if _, err := b.deleteGone(ctx, "kubelet_delete110_status", pods); err != nil {
		return err
	}
	return b.runLogFollow(ctx)
}

// logChunks of logChunkLines lines of about 100 bytes every 0.1 s: 10 MiB/s for 20 s.
const (
	logChunks     = 200
	logChunkLines = 10000
)

func (b *kubeletBench) runLogFollow(ctx context.Context) error {
	cmd := fmt.Sprintf(`sleep 3; i=0; while [ $i -lt %d ]; do
awk -v c=$i 'BEGIN { for (j = 1; j <= %d; j++) printf "%%05d %%06d 012345678901234567890123456789012345678901234567890123456789012345678901234567890123\n", c, j }'
sleep 0.1; i=$((i+1)); done; echo done; exec sleep 3600`, logChunks, logChunkLines)
	pods := []string{"chatty"}
	progress("kubelet: a container writing 10 MiB/s for 20 s, followed")
	if err := b.create(ctx, pods, 0, corev1.RestartPolicyAlways, func(int) []string { return []string{"sh", "-c", cmd} }); err != nil {
		return err
	}
	if err := b.watch.waitAll(ctx, pods, "Running", time.Minute, func(t *podTimes) bool { return !t.ready.IsZero() }); err != nil {
		return err
	}
	stream, err := b.client.CoreV1().Pods("default").GetLogs("chatty", &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	if err != nil {
		return err
	}
	defer stream.Close()
	start := time.Now()
	cpu0, err := readProc(b.kl.pid())
	if err != nil {
		return err
	}
	read, outOfOrder, want := 0, 0, 0
	s := bufio.NewScanner(stream)
	for s.Scan() {
		line := s.Text()
		if line == "done" {
			break
		}
		read++
		if !strings.HasPrefix(line, fmt.Sprintf("%05d %06d ", want/logChunkLines, want%logChunkLines+1)) {
			outOfOrder++
		}
		want++
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("follow: %w", err)
	}
	took := time.Since(start)
	cpu1, err := readProc(b.kl.pid())
	if err != nil {
		return err
	}
	logData, _ := os.ReadFile(b.kl.logPath)
	figure("kubelet_log_follow_lines_written", logChunks*logChunkLines, "lines")
	figure("kubelet_log_follow_lines_read", float64(read), "lines")
	figure("kubelet_log_follow_lines_lost", float64(logChunks*logChunkLines-read), "lines")
	figure("kubelet_log_follow_lines_out_of_order", float64(outOfOrder), "lines")
	figure("kubelet_log_follow_rotations", float64(strings.Count(string(logData), `"Rotated a container's log"`)), "rotations")
	figure("kubelet_log_follow_rate", float64(read)*100/1024/1024/took.Seconds(), "MiB/s")
	figure("kubelet_log_follow_kubelet_cpu", cpuPercent(cpu0, cpu1), "%core")
	_, err = b.deleteGone(ctx, "kubelet_delete_chatty", pods)
	return err
}

// endpointClient is an HTTPS client of the kubelet's endpoint with the admin's client certificate (which the
// standalone kubelet trusts); the kubelet's self-signed certificate is not checked.
func (b *kubeletBench) endpointClient() (*http.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", b.kl.kubeconfig)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	if err != nil {
		return nil, fmt.Errorf("admin client certificate: %w", err)
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}}}, nil //nolint:gosec // a bench on loopback
}

func getAll(ctx context.Context, c *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if strings.HasSuffix(url, "/debug/pods") {
		req.Header.Set("Accept", "application/json") // the page's data, as its refresh asks for it
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s", resp.Status)
	}
	return int(n), err
}

// metric reads a counter's or a gauge's value from the kubelet's /metrics.
func (b *kubeletBench) metric(ctx context.Context, c *http.Client, name string) (float64, error) {
	v, _, err := b.histogram(ctx, c, name)
	return v, err
}

// histogram reads a histogram's sum and count from the kubelet's /metrics (with an empty suffix: a plain
// series' value, as the sum).
func (b *kubeletBench) histogram(ctx context.Context, c *http.Client, name string) (float64, float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", b.kl.port), nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	value := func(suffix string) float64 {
		m := regexp.MustCompile(`(?m)^` + name + suffix + ` (\S+)$`).FindSubmatch(data)
		if m == nil {
			return 0
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	if !strings.HasSuffix(name, "_seconds") {
		return value(""), 0, nil
	}
	return value("_sum"), value("_count"), nil
}

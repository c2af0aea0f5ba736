package cgroups

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParsePSI(t *testing.T) {
	for _, tt := range []struct {
		name, data string
		want       *PSI
		wantErr    string
	}{
		{name: "some and full", data: "some avg10=1.50 avg60=0.25 avg300=0.00 total=123456\nfull avg10=0.50 avg60=0.10 avg300=0.01 total=7890\n",
			want: &PSI{Some: PSIData{Total: 123456, Avg10: 1.5, Avg60: 0.25}, Full: PSIData{Total: 7890, Avg10: 0.5, Avg60: 0.1, Avg300: 0.01}}},
		{name: "some only (the host's cpu before 5.13)", data: "some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n",
			want: &PSI{Some: PSIData{Total: 42}}},
		{name: "a field a later kernel adds", data: "some avg10=0.00 avg60=0.00 avg300=0.00 total=1 avg3600=0.00\n",
			want: &PSI{Some: PSIData{Total: 1}}},
		{name: "empty", data: "", wantErr: "without a some line"},
		{name: "unknown line", data: "most avg10=0.00 avg60=0.00 avg300=0.00 total=1\n", wantErr: "neither some nor full"},
		{name: "missing total", data: "some avg10=0.00 avg60=0.00 avg300=0.00\n", wantErr: "want avg10, avg60, avg300 and total"},
		{name: "not key=value", data: "some avg10 0.00\n", wantErr: "not key=value"},
		{name: "bad number", data: "some avg10=x avg60=0.00 avg300=0.00 total=1\n", wantErr: "avg10"},
		{name: "negative total", data: "some avg10=0 avg60=0 avg300=0 total=-1\n", wantErr: "total"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePSI(tt.data)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParsePSI = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// On cgroup v2 with PSI on, a pod's statistics carry its pressure files; a missing or damaged file leaves
// its resource out, the rest of the statistics whole. The node's come from the root cgroup, else
// /proc/pressure. On v1 there is none.
func TestPressureStats(t *testing.T) {
	const cpu = "some avg10=2.00 avg60=1.00 avg300=0.50 total=3000000\nfull avg10=1.00 avg60=0.50 avg300=0.25 total=1000000\n"
	for _, mode := range []Mode{ModeV2, ModeV1} {
		t.Run(mode.String(), func(t *testing.T) {
			h := newFakeHost(t, mode)
			cfg := h.config(DriverCgroupfs)
			cfg.PSI = true
			m, err := newManager(cfg, h.deps(DriverCgroupfs))
			if err != nil {
				t.Fatal(err)
			}
			ctx := testContext(t)
			if err := m.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := m.EnsurePod(ctx, burstablePod("s1")); err != nil {
				t.Fatal(err)
			}
			dir := rel(DriverCgroupfs, "kubepods", "burstable", "pods1")
			if mode.unified() {
				h.write("", dir, "cpu.stat", "usage_usec 5000000\n")
				h.write("", dir, "memory.current", "104857600\n")
				h.write("", dir, "memory.stat", v2MemoryStat(50<<20, 50<<20, 40<<20))
				h.write("", dir, "pids.current", "3\n")
				h.write("", dir, "cpu.pressure", cpu)
				h.write("", dir, "memory.pressure", "damaged\n")
				// no io.pressure
			}
			if err := os.MkdirAll(filepath.Join(h.proc, "pressure"), 0o755); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(h.proc, "pressure", "io"), cpu)
			if !mode.unified() {
				if st, _ := m.NodeStats(ctx); st.Pressure != (Pressure{}) {
					t.Errorf("cgroup v1 node pressure %+v, want none", st.Pressure)
				}
				return
			}
			st, err := m.PodStats(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
			want := &PSI{Some: PSIData{Total: 3000000, Avg10: 2, Avg60: 1, Avg300: 0.5}, Full: PSIData{Total: 1000000, Avg10: 1, Avg60: 0.5, Avg300: 0.25}}
			if !reflect.DeepEqual(st.Pressure.CPU, want) || st.Pressure.Memory != nil || st.Pressure.IO != nil || st.CPUUsageNanos != 5e9 {
				t.Errorf("pod stats %+v, pressure cpu %+v memory %+v io %+v", st, st.Pressure.CPU, st.Pressure.Memory, st.Pressure.IO)
			}
			// The fake root cgroup has no pressure files: /proc/pressure's are read (named cpu, memory, io).
			node, err := m.NodeStats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(node.Pressure.IO, want) || node.Pressure.CPU != nil || node.Pressure.Memory != nil {
				t.Errorf("node pressure %+v, want /proc/pressure/io's alone", node.Pressure)
			}
			mustWrite(t, filepath.Join(h.root, "cpu.pressure"), cpu)
			if node, _ = m.NodeStats(ctx); !reflect.DeepEqual(node.Pressure.CPU, want) {
				t.Errorf("node cpu pressure %+v, want the root cgroup's", node.Pressure.CPU)
			}
		})
	}
}

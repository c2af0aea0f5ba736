package node

import (
	"os"
	"path/filepath"
	"testing"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const testMeminfo = `MemTotal:       24610316 kB
MemFree:         1234567 kB
MemAvailable:   20000000 kB
HugePages_Total:       0
`

func TestReadHost(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"proc/meminfo":                   testMeminfo + "SwapTotal:       1048576 kB\n",
		"proc/sys/kernel/osrelease":      "6.1.0-18-amd64\n",
		"proc/sys/kernel/random/boot_id": "0a1b2c3d-boot\n",
		"etc/os-release":                 "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n",
		"etc/machine-id":                 "abcdef0123456789\n",
		"sys/class/dmi/id/product_uuid":  "4c4c4544-uuid\n",
		"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages":    "4\n",
		"sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages": "1\n",
	})
	h, err := readHost(root, root)
	if err != nil {
		t.Fatal(err)
	}
	if h.MemoryBytes != 24610316*1024 || h.SwapBytes != 1<<30 {
		t.Errorf("MemoryBytes = %d, SwapBytes = %d", h.MemoryBytes, h.SwapBytes)
	}
	// nodeInfo.swap: the capacity where the machine has swap, nothing where it has none.
	if s := swapStatus(h.SwapBytes); s == nil || *s.Capacity != 1<<30 {
		t.Errorf("swap status %+v, want capacity 1 GiB", s)
	}
	if s := swapStatus(0); s != nil {
		t.Errorf("swap status %+v on a machine without swap", s)
	}
	if h.NumCPU < 1 || h.EphemeralStorageBytes <= 0 {
		t.Errorf("NumCPU = %d, EphemeralStorageBytes = %d", h.NumCPU, h.EphemeralStorageBytes)
	}
	want := map[string]string{"kernel": "6.1.0-18-amd64", "os": "Debian GNU/Linux 12 (bookworm)",
		"machine": "abcdef0123456789", "uuid": "4c4c4544-uuid", "boot": "0a1b2c3d-boot"}
	got := map[string]string{"kernel": h.KernelVersion, "os": h.OSImage, "machine": h.MachineID,
		"uuid": h.SystemUUID, "boot": h.BootID}
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("%s = %q, want %q", k, got[k], want[k])
		}
	}
	if h.HugePages[2<<20] != 8<<20 || h.HugePages[1<<30] != 1<<30 || len(h.HugePages) != 2 {
		t.Errorf("HugePages = %v", h.HugePages)
	}
}

func TestReadHostFallbacks(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"proc/meminfo":            testMeminfo,
		"usr/lib/os-release":      "PRETTY_NAME='Other OS'\n",
		"var/lib/dbus/machine-id": "dbus-id\n",
	})
	h, err := readHost(root, root)
	if err != nil {
		t.Fatal(err)
	}
	if h.OSImage != "Other OS" || h.MachineID != "dbus-id" || len(h.HugePages) != 0 || h.SystemUUID != "" {
		t.Errorf("host = %+v", h)
	}
}

func TestReadHostErrors(t *testing.T) {
	root := t.TempDir()
	if _, err := readHost(root, root); err == nil {
		t.Error("no meminfo: want an error")
	}
	writeTree(t, root, map[string]string{"proc/meminfo": "MemFree: 1 kB\n"})
	if _, err := readHost(root, root); err == nil {
		t.Error("no MemTotal: want an error")
	}
	writeTree(t, root, map[string]string{"proc/meminfo": testMeminfo})
	if _, err := readHost(root, filepath.Join(root, "missing")); err == nil {
		t.Error("missing root dir: want an error")
	}
}

func TestMeminfoField(t *testing.T) {
	tests := []struct {
		name, in, field string
		want            int64
		ok              bool
	}{
		{"kB", "MemAvailable:   100 kB\n", "MemAvailable", 102400, true},
		{"no unit", "HugePages_Total:  3\n", "HugePages_Total", 3, true},
		{"missing", "MemTotal: 1 kB\n", "MemAvailable", 0, false},
		{"garbage", "MemAvailable: lots kB\n", "MemAvailable", 0, false},
		{"prefix is not the field", "MemAvailableX: 1 kB\n", "MemAvailable", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := meminfoField([]byte(tt.in), tt.field)
			if got != tt.want || ok != tt.ok {
				t.Errorf("got %d, %v; want %d, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestPrettyName(t *testing.T) {
	tests := map[string]string{
		"PRETTY_NAME=\"Ubuntu 24.04 LTS\"\n": "Ubuntu 24.04 LTS",
		"PRETTY_NAME=Plain\n":                "Plain",
		"NAME=x\n":                           "",
		"  PRETTY_NAME='single'\n":           "single",
	}
	for in, want := range tests {
		if got := prettyName([]byte(in)); got != want {
			t.Errorf("prettyName(%q) = %q, want %q", in, got, want)
		}
	}
}

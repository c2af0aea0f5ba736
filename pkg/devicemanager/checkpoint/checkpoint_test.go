package checkpoint

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// testdata/upstream-v1.35.4 was written by upstream's kubelet code (v1.35.4's devicemanager checkpoint and
// checkpointmanager): one container's Dev-1 of example.com/resource with its Allocate answer, and the
// resource's two devices.
func TestReadsUpstreamsCheckpoint(t *testing.T) {
	b, err := os.ReadFile("testdata/upstream-v1.35.4")
	if err != nil {
		t.Fatal(err)
	}
	entries, registered, err := Unmarshal(b)
	if err != nil {
		t.Fatalf("upstream's checkpoint refused: %v", err)
	}
	if len(entries) != 1 || entries[0].PodUID != "pod-1" || entries[0].ContainerName != "main" ||
		entries[0].ResourceName != "example.com/resource" || len(entries[0].DeviceIDs[0]) != 1 || len(entries[0].AllocResp) == 0 {
		t.Errorf("entries %+v", entries)
	}
	if got := registered["example.com/resource"]; len(got) != 2 {
		t.Errorf("registered %v", registered)
	}
	// The same content written here is byte for byte upstream's file (so upstream's kubelet reads ours).
	ours, err := Marshal(entries, registered)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, bytes.TrimSpace(b)) {
		t.Errorf("ours differs from upstream's:\n%s\n%s", ours, b)
	}
}

func TestRefusesDamagedCheckpoint(t *testing.T) {
	b, err := os.ReadFile("testdata/upstream-v1.35.4")
	if err != nil {
		t.Fatal(err)
	}
	for name, damaged := range map[string][]byte{
		"a device ID changed":  bytes.Replace(b, []byte(`"Dev-2"`), []byte(`"Dev-3"`), 1),
		"the checksum changed": bytes.Replace(b, []byte(`"Checksum":1`), []byte(`"Checksum":2`), 1),
		"not JSON":             b[:20],
	} {
		if _, _, err := Unmarshal(damaged); err == nil {
			t.Errorf("%s: accepted", name)
		} else if name != "not JSON" && !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

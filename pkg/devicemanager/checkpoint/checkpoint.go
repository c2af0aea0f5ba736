package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"

	"k8s.io/apimachinery/pkg/util/dump"
)

// FileName is the checkpoint's name in the device plugins' directory.
const FileName = "kubelet_internal_checkpoint"

// DevicesPerNUMA are a container's device IDs by the NUMA node they are on (-1, upstream's
// nodeWithoutTopology, when the plugin gave none; a device on two nodes is under both).
type DevicesPerNUMA map[int64][]string

// NoNUMA is the NUMA node of devices their plugin placed on none (upstream's nodeWithoutTopology).
const NoNUMA = -1

// IDs returns each device once, sorted.
func (d DevicesPerNUMA) IDs() []string {
	seen := map[string]bool{}
	var out []string
	for _, ids := range d {
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Clone returns a copy that shares nothing with d.
func (d DevicesPerNUMA) Clone() DevicesPerNUMA {
	out := make(DevicesPerNUMA, len(d))
	for n, ids := range d {
		out[n] = append([]string(nil), ids...)
	}
	return out
}

// PodDevicesEntry is what one container was allocated of one resource: the device IDs and the plugin's
// Allocate answer for it (a ContainerAllocateResponse in protobuf).
type PodDevicesEntry struct {
	PodUID        string
	ContainerName string
	ResourceName  string
	DeviceIDs     DevicesPerNUMA
	AllocResp     []byte
}

// checkpointData is named as upstream's: the checksum hashes its printed type name.
type checkpointData struct {
	PodDeviceEntries  []PodDevicesEntry
	RegisteredDevices map[string][]string
}

// Data is the file's content.
type Data struct {
	Data     checkpointData
	Checksum uint64
}

// ErrCorrupt is returned by Read for a checkpoint whose checksum does not match its content.
var ErrCorrupt = errors.New("checkpoint checksum mismatch")

// checksum is upstream's: FNV-32a of the data as apimachinery's dump.ForHash prints it.
func checksum(d checkpointData) uint64 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(d))
	return uint64(h.Sum32())
}

// Marshal returns the checkpoint of entries and registered devices.
func Marshal(entries []PodDevicesEntry, registered map[string][]string) ([]byte, error) {
	d := checkpointData{PodDeviceEntries: entries, RegisteredDevices: registered}
	return json.Marshal(Data{Data: d, Checksum: checksum(d)})
}

// Unmarshal parses a checkpoint and verifies its checksum.
func Unmarshal(b []byte) ([]PodDevicesEntry, map[string][]string, error) {
	var d Data
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, nil, fmt.Errorf("parse: %w", err)
	}
	if got := checksum(d.Data); got != d.Checksum {
		return nil, nil, fmt.Errorf("%w: recorded %d, content %d", ErrCorrupt, d.Checksum, got)
	}
	return d.Data.PodDeviceEntries, d.Data.RegisteredDevices, nil
}

// Write replaces the checkpoint in dir atomically (a temporary file renamed over it, synced first).
func Write(dir string, entries []PodDevicesEntry, registered map[string][]string) error {
	b, err := Marshal(entries, registered)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+FileName+"-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, FileName))
}

// Read reads the checkpoint in dir; a missing one is empty, not an error.
func Read(dir string) ([]PodDevicesEntry, map[string][]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return Unmarshal(b)
}

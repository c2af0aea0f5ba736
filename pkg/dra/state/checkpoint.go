package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"sort"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodeagent/kubelet/internal/atomicfile"
)

// The checkpoint's kind and API version, upstream's.
const (
	CheckpointKind       = "DRACheckpoint"
	CheckpointAPIVersion = "checkpoint.dra.kubelet.k8s.io/v1"
)

// ClaimInfoStateList is the checkpointed claims.
type ClaimInfoStateList []ClaimInfoState

// ClaimInfoState is one claim as checkpointed. Its fields have no JSON tags: upstream writes Go's names.
type ClaimInfoState struct {
	// ClaimUID is the UID of the ResourceClaim.
	ClaimUID types.UID
	// ClaimName is the name of the ResourceClaim.
	ClaimName string
	// Namespace is the namespace of the ResourceClaim.
	Namespace string
	// PodUIDs are the pods that use the claim on this node.
	PodUIDs sets.Set[string]
	// DriverState has one entry for each driver in the claim's allocation, even one without devices.
	DriverState map[string]DriverState
}

// DriverState is what one driver prepared for a claim.
type DriverState struct {
	Devices []Device
}

// Device is one prepared device, as the driver's NodePrepareResources reported it.
type Device struct {
	PoolName     string
	DeviceName   string
	ShareID      *types.UID
	RequestNames []string
	CDIDeviceIDs []string
}

// Checkpoint is the file's outer object.
type Checkpoint struct {
	// Data is the JSON of the checkpoint's data.
	Data string
	// Checksum is crc32.ChecksumIEEE of Data.
	Checksum uint32
}

// checkpointData is Data's object; kind and apiVersion as metav1.TypeMeta writes them.
type checkpointData struct {
	Kind               string `json:"kind,omitempty"`
	APIVersion         string `json:"apiVersion,omitempty"`
	ClaimInfoStateList ClaimInfoStateList
}

// CorruptCheckpointError is a checkpoint whose checksum does not match its data, or that is not valid JSON.
type CorruptCheckpointError struct {
	// ActualCS is the checksum in the file, ExpectedCS the checksum of its data (both 0 for invalid JSON).
	ActualCS, ExpectedCS uint64
	// Err is the decoding error, if that was the problem.
	Err error
}

func (e *CorruptCheckpointError) Error() string {
	if e.Err != nil {
		return "checkpoint is corrupted: " + e.Err.Error()
	}
	return fmt.Sprintf("checkpoint is corrupted: checksum %d in the file, %d of its data", e.ActualCS, e.ExpectedCS)
}

func (e *CorruptCheckpointError) Unwrap() error { return e.Err }

// Encode returns the checkpoint file of list. Entries are sorted by namespace and name (upstream writes them
// in map order; either reads back the same), so equal states give equal bytes. A nil list writes null, an
// empty one [], as upstream's new and emptied checkpoints.
func Encode(list ClaimInfoStateList) ([]byte, error) {
	var sorted ClaimInfoStateList
	if list != nil { // nil writes null (upstream's new checkpoint), empty [] (upstream's after the last unprepare)
		sorted = append(make(ClaimInfoStateList, 0, len(list)), list...)
	}
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.ClaimName < b.ClaimName
	})
	data, err := json.Marshal(&checkpointData{Kind: CheckpointKind, APIVersion: CheckpointAPIVersion, ClaimInfoStateList: sorted})
	if err != nil {
		return nil, err
	}
	return json.Marshal(&Checkpoint{Data: string(data), Checksum: crc32.ChecksumIEEE(data)})
}

// Decode reads a checkpoint file. A checksum mismatch or invalid JSON is a *CorruptCheckpointError. The
// entries come back with non-nil PodUIDs and DriverState. The API version is not checked (upstream does not).
func Decode(blob []byte) (ClaimInfoStateList, error) {
	var cp Checkpoint
	if err := json.Unmarshal(blob, &cp); err != nil {
		return nil, &CorruptCheckpointError{Err: err}
	}
	if sum := crc32.ChecksumIEEE([]byte(cp.Data)); sum != cp.Checksum {
		return nil, &CorruptCheckpointError{ActualCS: uint64(cp.Checksum), ExpectedCS: uint64(sum)}
	}
	var data checkpointData
	if err := json.Unmarshal([]byte(cp.Data), &data); err != nil {
		return nil, &CorruptCheckpointError{Err: err}
	}
	for i := range data.ClaimInfoStateList {
		e := &data.ClaimInfoStateList[i]
		if e.PodUIDs == nil {
			e.PodUIDs = sets.New[string]()
		}
		if e.DriverState == nil {
			e.DriverState = map[string]DriverState{}
		}
	}
	return data.ClaimInfoStateList, nil
}

// Load reads the checkpoint at path; a missing file is an empty list.
func Load(path string) (ClaimInfoStateList, error) {
	blob, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return Decode(blob)
}

// Store writes list to path atomically.
func Store(path string, list ClaimInfoStateList) error {
	blob, err := Encode(list)
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	return atomicfile.Write(path, blob, 0o600)
}

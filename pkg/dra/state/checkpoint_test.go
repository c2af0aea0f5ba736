package state

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Upstream's checkpoints (k8s.io/kubernetes v1.35 pkg/kubelet/cm/dra/state/checkpointer_test.go).
const (
	upstreamSingle         = `{"Data":"{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\",\"ClaimInfoStateList\":[{\"ClaimUID\":\"067798be-454e-4be4-9047-1aa06aea63f7\",\"ClaimName\":\"example\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-1\",\"ShareID\":null,\"RequestNames\":[\"test request\"],\"CDIDeviceIDs\":[\"example.com/example=cdi-example\"]}]}}}]}","Checksum":2570581864}`
	upstreamShareID        = `{"Data":"{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\",\"ClaimInfoStateList\":[{\"ClaimUID\":\"067798be-454e-4be4-9047-1aa06aea63f7\",\"ClaimName\":\"example\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-1\",\"ShareID\":\"aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa\",\"RequestNames\":[\"test request\"],\"CDIDeviceIDs\":[\"example.com/example=cdi-example\"]}]}}}]}","Checksum":736302156}`
	upstreamMultipleDevice = `{"Data":"{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\",\"ClaimInfoStateList\":[{\"ClaimUID\":\"067798be-454e-4be4-9047-1aa06aea63f7\",\"ClaimName\":\"example\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-1\",\"ShareID\":null,\"RequestNames\":[\"test request\"],\"CDIDeviceIDs\":[\"example.com/example=cdi-example\"]},{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-2\",\"ShareID\":null,\"RequestNames\":[\"test request\"],\"CDIDeviceIDs\":[\"example.com/example=cdi-example\"]}]}}}]}","Checksum":1223221469}`
	upstreamTwoClaims      = `{"Data":"{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\",\"ClaimInfoStateList\":[{\"ClaimUID\":\"067798be-454e-4be4-9047-1aa06aea63f7\",\"ClaimName\":\"example-1\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-1\",\"ShareID\":null,\"RequestNames\":[\"test request\"],\"CDIDeviceIDs\":[\"example.com/example=cdi-example\"]}]}}},{\"ClaimUID\":\"4cf8db2d-06c0-7d70-1a51-e59b25b2c16c\",\"ClaimName\":\"example-2\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-2\",\"ShareID\":null,\"RequestNames\":null,\"CDIDeviceIDs\":null}]}}}]}","Checksum":2820117767}`
	upstreamBadChecksum    = `{"Data":"{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\",\"Entries\":[{\"ClaimUID\":\"067798be-454e-4be4-9047-1aa06aea63f7\",\"ClaimName\":\"example-1\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-1\",\"RequestNames\":[\"test request\"],\"CDIDeviceIDs\":[\"example.com/example=cdi-example\"]}]}}},{\"ClaimUID\":\"4cf8db2d-06c0-7d70-1a51-e59b25b2c16c\",\"ClaimName\":\"example-2\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-2\",\"RequestNames\":null,\"CDIDeviceIDs\":null}]}}}]}","Checksum":2930258365}`
	upstreamUpgraded       = `{"Data":"{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\",\"ClaimInfoStateList\":[{\"ClaimUID\":\"067798be-454e-4be4-9047-1aa06aea63f7\",\"ClaimName\":\"example\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-1\",\"CDIDeviceIDs\":[\"example.com/example=cdi-example\"]}]}}}]}","Checksum":1137250765}`
	upstreamUpgradedV0     = `{"Data":"{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v0\",\"ClaimInfoStateList\":[{\"ClaimUID\":\"067798be-454e-4be4-9047-1aa06aea63f7\",\"ClaimName\":\"example\",\"Namespace\":\"default\",\"PodUIDs\":{\"139cdb46-f989-4f17-9561-ca10cfb509a6\":{}},\"DriverState\":{\"test-driver.cdi.k8s.io\":{\"Devices\":[{\"PoolName\":\"worker-1\",\"DeviceName\":\"dev-1\",\"CDIDeviceIDs\":[\"example.com/example=cdi-example\"]}]}}}]}","Checksum":1284376732}`
)

const (
	claimUID = "067798be-454e-4be4-9047-1aa06aea63f7"
	podUID   = "139cdb46-f989-4f17-9561-ca10cfb509a6"
	driver   = "test-driver.cdi.k8s.io"
)

func entry(name string, uid types.UID, devices ...Device) ClaimInfoState {
	return ClaimInfoState{ClaimUID: uid, ClaimName: name, Namespace: "default", PodUIDs: sets.New(podUID),
		DriverState: map[string]DriverState{driver: {Devices: devices}}}
}

func dev(name string, shareID *types.UID, requests, cdi []string) Device {
	return Device{PoolName: "worker-1", DeviceName: name, ShareID: shareID, RequestNames: requests, CDIDeviceIDs: cdi}
}

var (
	testRequests = []string{"test request"}
	testCDI      = []string{"example.com/example=cdi-example"}
	shareID      = types.UID("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa")
)

// Upstream's checkpoints decode to upstream's expected states, and those states encode to upstream's bytes.
func TestUpstreamCheckpoints(t *testing.T) {
	for _, tc := range []struct {
		name      string
		blob      string
		want      ClaimInfoStateList
		roundTrip bool // Encode(want) gives blob back
	}{
		{"single", upstreamSingle, ClaimInfoStateList{entry("example", claimUID, dev("dev-1", nil, testRequests, testCDI))}, true},
		{"share-id", upstreamShareID, ClaimInfoStateList{entry("example", claimUID, dev("dev-1", &shareID, testRequests, testCDI))}, true},
		{"multiple-devices", upstreamMultipleDevice, ClaimInfoStateList{entry("example", claimUID,
			dev("dev-1", nil, testRequests, testCDI), dev("dev-2", nil, testRequests, testCDI))}, true},
		{"two-claims", upstreamTwoClaims, ClaimInfoStateList{
			entry("example-1", claimUID, dev("dev-1", nil, testRequests, testCDI)),
			entry("example-2", "4cf8db2d-06c0-7d70-1a51-e59b25b2c16c", dev("dev-2", nil, nil, nil))}, true},
		{"upgraded", upstreamUpgraded, ClaimInfoStateList{entry("example", claimUID, dev("dev-1", nil, nil, testCDI))}, false},
		{"upgraded-v0", upstreamUpgradedV0, ClaimInfoStateList{entry("example", claimUID, dev("dev-1", nil, nil, testCDI))}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "dra_manager_state")
			if err := os.WriteFile(path, []byte(tc.blob), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decoded\n%#v\nwant\n%#v", got, tc.want)
			}
			if !tc.roundTrip {
				return
			}
			// Reverse the entries: the file must not depend on the order of the cache's map.
			rev := make(ClaimInfoStateList, 0, len(tc.want))
			for i := len(tc.want) - 1; i >= 0; i-- {
				rev = append(rev, tc.want[i])
			}
			if err := Store(path, rev); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(path); string(b) != tc.blob {
				t.Fatalf("wrote\n%s\nwant\n%s", b, tc.blob)
			}
		})
	}
}

func TestCorruptCheckpoints(t *testing.T) {
	for name, blob := range map[string]string{
		"bad-checksum": upstreamBadChecksum,
		"invalid-json": `{`,
		"bad-data":     `{"Data":"{","Checksum":366298937}`,
		"data-type":    `{"Data":"{\"ClaimInfoStateList\":3}","Checksum":1095117551}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode([]byte(blob))
			var corrupt *CorruptCheckpointError
			if !errors.As(err, &corrupt) {
				t.Fatalf("got %v, want a CorruptCheckpointError", err)
			}
		})
	}
}

// Missing sets and maps come back empty, not nil: the cache inserts into them.
func TestDecodeNulls(t *testing.T) {
	blob, err := Encode(ClaimInfoStateList{{ClaimUID: "u", ClaimName: "c", Namespace: "n"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(blob)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].PodUIDs == nil || got[0].DriverState == nil {
		t.Fatalf("got %#v", got)
	}
	got[0].PodUIDs.Insert("p")
}

// A missing file is empty; nil and empty lists are written as upstream's new and emptied checkpoints.
func TestLoadMissingAndEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dra_manager_state")
	if list, err := Load(path); err != nil || list != nil {
		t.Fatalf("got %v, %v", list, err)
	}
	for _, tc := range []struct {
		list ClaimInfoStateList
		data string
	}{
		{nil, `{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\",\"ClaimInfoStateList\":null}`},
		{ClaimInfoStateList{}, `{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\",\"ClaimInfoStateList\":[]}`},
	} {
		if err := Store(path, tc.list); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		if want := `{"Data":"` + tc.data + `","Checksum":`; len(b) < len(want) || string(b[:len(want)]) != want {
			t.Fatalf("wrote %s", b)
		}
		if list, err := Load(path); err != nil || len(list) != 0 {
			t.Fatalf("got %v, %v", list, err)
		}
	}
}

// Package state is the DRA manager's checkpoint, <root dir>/dra_manager_state, in upstream's format
// (k8s.io/kubernetes pkg/kubelet/cm/dra/state), byte for byte: a kubelet upgraded or downgraded across
// upstream and this one reads the other's file.
//
// The file is the JSON {"Data":"<string>","Checksum":<uint32>}, Checksum being the CRC-32 (IEEE) of Data;
// Data is the JSON {"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1",
// "ClaimInfoStateList":[...]} of the claims the kubelet has prepared or is preparing, with the pods that use
// them and the devices their drivers reported.
package state

package node

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestValidateLabels(t *testing.T) {
	tests := []struct {
		name    string
		labels  map[string]string
		wantErr string
	}{
		{"empty", nil, ""},
		{"plain", map[string]string{"rack": "r1", "example.com/tier": "db"}, ""},
		{"allowed kubernetes.io", map[string]string{"node.kubernetes.io/role": "w", "kubelet.kubernetes.io/x": "y",
			"topology.kubernetes.io/zone": "z"}, ""},
		{"role label refused", map[string]string{"node-role.kubernetes.io/master": ""}, "unknown 'kubernetes.io' or 'k8s.io' labels"},
		{"k8s.io refused", map[string]string{"foo.k8s.io/x": "y"}, "unknown"},
		{"bad key", map[string]string{"bad key": "v"}, "invalid node labels"},
		{"bad value", map[string]string{"k": "a b"}, "invalid node labels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateLabels(tt.labels)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseTaints(t *testing.T) {
	tests := []struct {
		name    string
		specs   []string
		want    []v1.Taint
		wantErr string
	}{
		{"key=value:effect", []string{"dedicated=db:NoSchedule"}, []v1.Taint{{Key: "dedicated", Value: "db", Effect: "NoSchedule"}}, ""},
		{"key:effect", []string{"gpu:NoExecute", "gpu:PreferNoSchedule"}, []v1.Taint{{Key: "gpu", Effect: "NoExecute"},
			{Key: "gpu", Effect: "PreferNoSchedule"}}, ""},
		{"no effect", []string{"dedicated=db"}, nil, "invalid taint spec"},
		{"bad effect", []string{"k=v:Sometimes"}, nil, "invalid taint effect"},
		{"duplicate", []string{"k=a:NoSchedule", "k=b:NoSchedule"}, nil, "duplicated taints"},
		{"bad key", []string{"bad key=v:NoSchedule"}, nil, "invalid taint spec"},
		{"two equals", []string{"k=v=w:NoSchedule"}, nil, "invalid taint spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTaints(tt.specs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v", got)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("[%d] = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

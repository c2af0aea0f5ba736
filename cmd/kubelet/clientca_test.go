package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Joined to a cluster, the endpoint's client CA is --client-ca-file's and nothing else: without the flag no
// client certificate is accepted (the kubeconfig's cluster CA is not taken in its place), as upstream.
func TestClientCA(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(file, []byte("PEM"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		flag    string
		want    string
		wantErr bool
	}{
		{"no flag: no client certificates", "", "", false},
		{"flag", file, "PEM", false},
		{"missing file", filepath.Join(dir, "missing"), "", true},
	} {
		got, err := clientCA(&options{clientCAFile: tc.flag})
		if (err != nil) != tc.wantErr || string(got) != tc.want || (tc.want == "" && got != nil) {
			t.Errorf("%s: %q, %v", tc.name, got, err)
		}
	}
}

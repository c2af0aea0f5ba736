package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNodeCredentials(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "acr"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const head = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n  - name: acr\n"
	good := write("good.yaml", head+"    matchImages: ['*.azurecr.io']\n    defaultCacheDuration: 10m\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n")
	noCache := write("nocache.yaml", head+"    matchImages: ['*.azurecr.io']\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n")
	missingBin := write("missing.yaml", strings.Replace(head, "acr", "ecr", 1)+"    matchImages: ['*.amazonaws.com']\n    defaultCacheDuration: 1m\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n")

	for _, tt := range []struct {
		name, config, binDir string
		want                 []string // what the error says; none: no error
	}{
		{"none", "", "", nil},
		{"good", good, bin, nil},
		{"a field missing", noCache, bin, []string{noCache, "providers[0].defaultCacheDuration: required"}},
		{"a binary missing", missingBin, bin, []string{missingBin, `provider "ecr"`}},
		{"no such file", filepath.Join(dir, "none.yaml"), bin, []string{"none.yaml"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := defaultOptions()
			o.rootDir = dir
			o.imageCredentialProviderConfig, o.imageCredentialProviderBinDir = tt.config, tt.binDir
			n, err := nodeCredentials(context.Background(), o)
			if tt.want == nil {
				if err != nil || n == nil {
					t.Fatalf("%v, %v", n, err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

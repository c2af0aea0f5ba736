package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSwapOn(t *testing.T) {
	for _, tt := range []struct {
		name, swaps string
		want        bool
	}{
		{"header only", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n", false},
		{"a swap file", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/swapfile                               file\t\t262140\t\t0\t\t-2\n", true},
		{"empty", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "swaps"), []byte(tt.swaps), 0o644); err != nil {
				t.Fatal(err)
			}
			if got, err := swapOn(dir); err != nil || got != tt.want {
				t.Fatalf("swapOn = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if on, err := swapOn(t.TempDir()); err != nil || on {
		t.Errorf("a kernel without /proc/swaps: %v, %v; want off", on, err)
	}
}

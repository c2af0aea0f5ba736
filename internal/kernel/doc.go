// Package kernel answers whether the running Linux kernel is at least a given release, for features that
// need one (recursive read-only mounts, tmpfs noswap) and for the tests that check them.
package kernel

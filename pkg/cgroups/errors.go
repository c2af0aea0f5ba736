package cgroups

import "errors"

// Error classes; check with errors.Is.
var (
	// ErrConfig is a bad setting (flag or config file).
	ErrConfig = errors.New("invalid cgroup configuration")
	// ErrHostUnsupported is a host that does not fit the configuration:
	// no cgroup hierarchy, a required controller missing, the systemd
	// driver without systemd as PID 1.
	ErrHostUnsupported = errors.New("cgroup setup not supported on this host")
	// ErrNotWritable is a cgroup hierarchy that cannot be written.
	ErrNotWritable = errors.New("cgroup hierarchy not writable")
	// ErrInvalidResources is a pod whose resources cannot be enforced; the
	// pod should be rejected at admission.
	ErrInvalidResources = errors.New("invalid pod resources")
	// ErrNotStarted is a call before Start succeeded.
	ErrNotStarted = errors.New("cgroup manager not started")
	// ErrNotFound is a pod without a cgroup.
	ErrNotFound = errors.New("pod cgroup not found")
)

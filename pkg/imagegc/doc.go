// Package imagegc is the kubelet's image garbage collector, as upstream's image manager: it keeps, for every
// image the runtime has, when it was first seen and when a container last used it, and removes unused images,
// least recently used first, when the image filesystem is fuller than --image-gc-high-threshold (85%) until it
// is down to --image-gc-low-threshold (80%); images unused for longer than imageMaximumGCAge go regardless. An
// image in use by any container (running or exited), a pinned image (the pause image) or one first seen less
// than --image-minimum-gc-age (2 min) ago is never removed. The eviction manager asks it to free what it can
// under disk pressure.
//
// The times survive a restart of the kubelet in <root dir>/image_gc_state.json, so that an image used an hour
// before a restart is not taken for one never used. The choice of images is a pure function (choose) with table
// tests; Manager reads the runtime and the filesystem, removes, records events (FreeDiskSpaceFailed,
// ImageGCFailed) and keeps the state.
package imagegc

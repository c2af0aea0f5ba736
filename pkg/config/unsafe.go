package config

import "unsafe"

// unsafePointer converts a byte address in an inotify buffer to a pointer to the event read there.
func unsafePointer(b *byte) unsafe.Pointer { return unsafe.Pointer(b) }

// Package storage is the lightweight apiserver's persistent object store.
//
// It owns one bbolt file holding every API object as JSON under a key of the
// form "<resource>/<namespace>/<name>" (namespace empty for cluster-scoped
// objects), a global monotonic resourceVersion persisted in the same file, an
// in-memory copy of every object (raw JSON plus its labels and indexed fields,
// so lists never re-read the file), and a bounded in-memory event log that
// serves watches and their resumption.
//
// Writes are group-committed: a write is ordered and given its resourceVersion
// under a short lock, then a single committer goroutine writes all pending
// writes in one bbolt transaction (one fsync) and only then makes them visible
// to readers and watchers and acknowledges them. A write that returned nil is
// durable.
//
// The package knows nothing about HTTP, authorization or kinds' semantics: the
// caller supplies a Codec that turns objects into bytes and index values.
package storage

package storage

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrDamaged is wrapped by the error of Open for a store file bbolt cannot read: its pages are damaged.
var ErrDamaged = errors.New("store file damaged")

// ErrInUse is wrapped by the error of Open for a store file another process holds open.
var ErrInUse = errors.New("store file in use")

// DamagedRecovery says what an admin does about a damaged store file.
const DamagedRecovery = "restore a snapshot (apiserver snapshot restore FILE --data-dir DIR), or move the file aside to start with an empty store"

// openBolt opens the bbolt file at path. bbolt panics on some damaged pages rather than fail: that panic is
// an error here, so that a damaged file stops the server with one line naming it and what to do.
func openBolt(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, damaged(path, fmt.Errorf("%v", r))
		}
	}()
	db, err = bolt.Open(path, 0o600, opts)
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("%w: %s is held by another process (an API server serving this data directory?)", ErrInUse, path)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch),
		errors.Is(err, berrors.ErrInvalidMapping):
		return nil, damaged(path, err)
	case err != nil:
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return db, nil
}

func damaged(path string, cause error) error {
	return fmt.Errorf("%w: %s cannot be read (%v); %s", ErrDamaged, path, cause, DamagedRecovery)
}

// safeLoad is load, with a bbolt panic on a damaged page turned into ErrDamaged.
func (s *Store) safeLoad(path string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = damaged(path, fmt.Errorf("%v", r))
		}
	}()
	return s.load()
}

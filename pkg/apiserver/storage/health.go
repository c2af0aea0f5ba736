package storage

import (
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// Health returns why the last commit failed, or nil when it succeeded (or
// none was tried). A failed store keeps taking writes; the first commit that
// succeeds, a write's or the store's own periodic probe, makes it healthy.
func (s *Store) Health() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.health
}

// probe tries a commit that rewrites the stored resourceVersion, and records
// its outcome as the store's health.
func (s *Store) probe() {
	s.mu.RLock()
	rv := s.doneRV
	s.mu.RUnlock()
	err := s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyRV, []byte(strconv.FormatUint(rv, 10)))
	})
	s.mu.Lock()
	if err == nil && s.health != nil {
		s.health = nil
		s.opts.Logger.Info("Store commits succeed again")
	}
	s.mu.Unlock()
}

// update runs one bbolt write transaction, failed first by the FailCommit
// hook when it says so.
func (s *Store) update(fn func(*bolt.Tx) error) error {
	if s.opts.FailCommit != nil {
		if err := s.opts.FailCommit(); err != nil {
			return err
		}
	}
	return s.db.Update(fn)
}

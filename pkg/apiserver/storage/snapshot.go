package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Snapshots are copies of the store file, as etcd's: a bbolt read transaction's WriteTo, a consistent copy
// of the file as of the transaction's start, taken while the store serves. Every write a Store acknowledged
// before a snapshot began is in it (Update answers once its commit is on disk).

// Backup writes a consistent copy of the store file to w, while the store serves.
func (s *Store) Backup(w io.Writer) (int64, error) {
	var n int64
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// BackupFile writes a consistent copy of the store file at path to w, when no process holds it: it fails
// with ErrInUse within timeout when one does (a serving API server holds its file; ask it instead).
func BackupFile(path string, w io.Writer, timeout time.Duration) (int64, error) {
	if _, err := os.Stat(path); err != nil {
		return 0, err
	}
	db, err := openBolt(path, &bolt.Options{ReadOnly: true, Timeout: timeout})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// Summary describes a verified store file.
type Summary struct {
	Objects         int
	ResourceVersion uint64
}

// Verify opens the store file at path read-only and decodes every object in it with codec: it fails on a
// file bbolt cannot read, and on the first object that does not decode, naming its key.
func Verify(path string, codec Codec) (Summary, error) {
	var sum Summary
	if _, err := os.Stat(path); err != nil {
		return sum, err
	}
	db, err := openBolt(path, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return sum, err
	}
	defer db.Close()
	err = func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = damaged(path, fmt.Errorf("%v", r))
			}
		}()
		return db.View(func(tx *bolt.Tx) error {
			objs, metaB := tx.Bucket(bucketObjects), tx.Bucket(bucketMeta)
			if objs == nil || metaB == nil {
				return fmt.Errorf("%s is not an API server store (no objects or meta bucket)", path)
			}
			if v := metaB.Get(keyRV); v != nil {
				rv, err := strconv.ParseUint(string(v), 10, 64)
				if err != nil {
					return damaged(path, fmt.Errorf("resourceVersion %q: %w", v, err))
				}
				sum.ResourceVersion = rv
			}
			return objs.ForEach(func(k, v []byte) error {
				obj, err := codec.Decode(string(k), v)
				if err == nil {
					_, err = objectRV(obj)
				}
				if err != nil {
					return &CorruptError{Key: string(k), Err: err}
				}
				sum.Objects++
				return nil
			})
		})
	}()
	return sum, err
}

// Restore replaces the store file at path with the snapshot file snap, once Verify accepts it; the file it
// replaces is kept beside it, renamed with the time of the restore, and returned (empty when there was
// none). It refuses while a process (a serving API server) holds the file, and holds it itself meanwhile.
// The restored store's resourceVersion is the higher of the snapshot's and the replaced file's, so that
// clients which saw the replaced one's relist rather than resume a watch past the restored state.
func Restore(snap, path string, codec Codec) (aside string, err error) {
	sum, err := Verify(snap, codec)
	if err != nil {
		return "", fmt.Errorf("snapshot %s: %w", snap, err)
	}
	var oldRV uint64
	if _, err := os.Stat(path); err == nil {
		// Held open, exclusively, until the new file is in place: no server starts on the old one meanwhile.
		old, err := openBolt(path, &bolt.Options{Timeout: time.Second})
		switch {
		case errors.Is(err, ErrInUse):
			return "", fmt.Errorf("%w: stop the API server (the kubelet of a standalone node runs it) before a restore", err)
		case err == nil:
			_ = old.View(func(tx *bolt.Tx) error {
				if b := tx.Bucket(bucketMeta); b != nil {
					oldRV, _ = strconv.ParseUint(string(b.Get(keyRV)), 10, 64)
				}
				return nil
			})
			defer old.Close()
		case !errors.Is(err, ErrDamaged):
			return "", err
		}
		// A damaged file is what a restore is for: it is moved aside like any other.
	}
	tmp := path + ".restoring"
	if err := copyFile(snap, tmp); err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	if oldRV > sum.ResourceVersion {
		db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: time.Second})
		if err != nil {
			return "", err
		}
		err = db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(keyRV, []byte(strconv.FormatUint(oldRV, 10)))
		})
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", fmt.Errorf("carry the resourceVersion over: %w", err)
		}
	}
	if _, err := os.Stat(path); err == nil {
		aside = fmt.Sprintf("%s.before-restore-%s", path, time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(path, aside); err != nil {
			return "", err
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return aside, err
	}
	return aside, syncDir(filepath.Dir(path))
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

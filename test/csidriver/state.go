package csidriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The names kept beside a volume's data in the state directory (see ValidateVolumeID).
const (
	recordSuffix = ".json"
	imageSuffix  = ".img"
	tempSuffix   = ".tmp"
	logSuffix    = ".log"
)

// errNoVolume says a volume has neither a record nor data in the state directory.
var errNoVolume = errors.New("no such volume")

// Publication is one NodePublishVolume the driver made, with the parameters it was made with: a second call
// for the same target path is idempotent only with the same ones.
type Publication struct {
	ReadOnly   bool     `json:"readOnly,omitempty"`
	Block      bool     `json:"block,omitempty"`
	AccessMode string   `json:"accessMode"`
	MountFlags []string `json:"mountFlags,omitempty"`
}

// Volume is the driver's record of one volume, kept in <state-dir>/<id>.json so that a restarted driver
// knows its volumes' capacity, where each is staged and published, and which loop device backs a staged
// block volume.
type Volume struct {
	ID            string `json:"id"`
	CapacityBytes int64  `json:"capacityBytes"`
	Block         bool   `json:"block,omitempty"`
	// Static is set for a volume the driver did not create: its data was found in the state directory, or
	// made by its first NodeStageVolume.
	Static bool `json:"static,omitempty"`
	// Ephemeral is set for an inline ephemeral volume, whose data goes with its last publication.
	Ephemeral   bool                   `json:"ephemeral,omitempty"`
	StagingPath string                 `json:"stagingPath,omitempty"`
	LoopDevice  string                 `json:"loopDevice,omitempty"`
	Published   map[string]Publication `json:"published,omitempty"`
}

// store reads and writes the state directory. Its caller holds the volume's lock: a record is read, changed
// and written by one call at a time.
type store struct {
	dir string // absolute and clean
}

// dataPath is where a volume's data lives: a direct child of the state directory, for a valid volume ID.
func (s store) dataPath(id string, block bool) string {
	if block {
		return filepath.Join(s.dir, id+imageSuffix)
	}
	return filepath.Join(s.dir, id)
}

func (s store) recordPath(id string) string { return filepath.Join(s.dir, id+recordSuffix) }

// load returns id's record, or errNoVolume. A volume with data but no record (a directory or an image put
// in the state directory by hand, for static provisioning) gets a record made from its data, not yet saved.
func (s store) load(id string) (*Volume, error) {
	b, err := os.ReadFile(s.recordPath(id))
	switch {
	case err == nil:
		var v Volume
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("read record of volume %q: %w", id, err)
		}
		if v.ID != id {
			return nil, fmt.Errorf("record %s is for volume %q", s.recordPath(id), v.ID)
		}
		return &v, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read record of volume %q: %w", id, err)
	}
	if ok, err := s.hasData(id, false); err != nil || ok {
		return &Volume{ID: id, Static: true}, err
	}
	ok, err := s.hasData(id, true)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, errNoVolume
	}
	fi, err := os.Lstat(s.dataPath(id, true))
	if err != nil {
		return nil, err
	}
	return &Volume{ID: id, Block: true, Static: true, CapacityBytes: fi.Size()}, nil
}

// hasData reports whether the volume's data exists: a directory for a filesystem volume, a regular file for
// a block volume. Anything else at the path (a symbolic link above all) is an error, never followed.
func (s store) hasData(id string, block bool) (bool, error) {
	p := s.dataPath(id, block)
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case block && !fi.Mode().IsRegular():
		return false, fmt.Errorf("%s is not a regular file (mode %s)", p, fi.Mode())
	case !block && !fi.IsDir():
		return false, fmt.Errorf("%s is not a directory (mode %s)", p, fi.Mode())
	}
	return true, nil
}

// save writes v's record atomically (a temporary file renamed over the record), so that a driver killed
// mid-write leaves the old record or the new one.
func (s store) save(v *Volume) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.recordPath(v.ID) + tempSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write record of volume %q: %w", v.ID, err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.recordPath(v.ID))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write record of volume %q: %w", v.ID, err)
	}
	return nil
}

// remove deletes id's record; a record already gone is no error.
func (s store) remove(id string) error {
	if err := os.Remove(s.recordPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove record of volume %q: %w", id, err)
	}
	return nil
}

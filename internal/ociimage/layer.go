package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path"
	"sort"
	"time"
)

// epoch is the modification time of every entry the package writes, so that
// the same inputs always give the same bytes.
var epoch = time.Unix(0, 0).UTC()

type layerEntry struct {
	hdr  tar.Header
	data []byte
}

// layerEntries resolves a Spec into tar entries keyed by clean path, with the
// missing parent directories added. Host files are read here.
func layerEntries(s Spec) (map[string]*layerEntry, error) {
	entries := make(map[string]*layerEntry)
	add := func(p string, e *layerEntry) error {
		name, err := cleanPath(p)
		if err != nil {
			return err
		}
		if _, dup := entries[name]; dup {
			return fmt.Errorf("path %q listed twice", "/"+name)
		}
		e.hdr.Name = name
		entries[name] = e
		return nil
	}
	for _, d := range s.Dirs {
		mode := d.Mode
		if mode == 0 {
			mode = 0o755
		}
		e := &layerEntry{hdr: tar.Header{Typeflag: tar.TypeDir, Mode: tarMode(mode), Uid: d.UID, Gid: d.GID}}
		if err := add(d.Path, e); err != nil {
			return nil, fmt.Errorf("dir: %w", err)
		}
	}
	for _, f := range s.Files {
		data, mode, err := fileContent(f)
		if err != nil {
			return nil, err
		}
		e := &layerEntry{
			hdr:  tar.Header{Typeflag: tar.TypeReg, Mode: tarMode(mode), Uid: f.UID, Gid: f.GID, Size: int64(len(data))},
			data: data,
		}
		if err := add(f.Path, e); err != nil {
			return nil, fmt.Errorf("file: %w", err)
		}
	}
	for _, l := range s.Symlinks {
		if l.Target == "" {
			return nil, fmt.Errorf("symlink %q: empty target", l.Path)
		}
		e := &layerEntry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Mode: 0o777, Linkname: l.Target}}
		if err := add(l.Path, e); err != nil {
			return nil, fmt.Errorf("symlink: %w", err)
		}
	}
	if err := addParents(entries); err != nil {
		return nil, err
	}
	return entries, nil
}

func fileContent(f File) ([]byte, os.FileMode, error) {
	if f.Source == "" {
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		return f.Data, mode, nil
	}
	if f.Data != nil {
		return nil, 0, fmt.Errorf("file %q: both Source and Data set", f.Path)
	}
	data, err := os.ReadFile(f.Source)
	if err != nil {
		return nil, 0, fmt.Errorf("file %q: %w", f.Path, err)
	}
	mode := f.Mode
	if mode == 0 {
		st, err := os.Stat(f.Source)
		if err != nil {
			return nil, 0, fmt.Errorf("file %q: %w", f.Path, err)
		}
		mode = st.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
	}
	return data, mode, nil
}

// addParents creates the directories that entries need and checks that no
// entry sits below a file or a symlink.
func addParents(entries map[string]*layerEntry) error {
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	for _, name := range names {
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			parent, ok := entries[dir]
			if !ok {
				entries[dir] = &layerEntry{hdr: tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755}}
				continue
			}
			if parent.hdr.Typeflag != tar.TypeDir {
				return fmt.Errorf("path %q: parent %q is not a directory", "/"+name, "/"+dir)
			}
		}
	}
	return nil
}

// buildLayer returns the uncompressed layer tar and its gzip form. Entries
// are sorted by path, so parents come before their children.
func buildLayer(s Spec) (tarData, gzData []byte, err error) {
	entries, err := layerEntries(s)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	sort.Strings(names)

	var tbuf bytes.Buffer
	tw := tar.NewWriter(&tbuf)
	for _, name := range names {
		e := entries[name]
		hdr := e.hdr
		hdr.ModTime = epoch
		if hdr.Typeflag == tar.TypeDir {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(&hdr); err != nil {
			return nil, nil, fmt.Errorf("write layer entry %q: %w", name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, nil, fmt.Errorf("write layer entry %q: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, nil, fmt.Errorf("close layer tar: %w", err)
	}

	var gbuf bytes.Buffer
	gw := gzip.NewWriter(&gbuf) // header carries no name and a zero mtime
	if _, err := gw.Write(tbuf.Bytes()); err != nil {
		return nil, nil, fmt.Errorf("compress layer: %w", err)
	}
	if err := gw.Close(); err != nil {
		return nil, nil, fmt.Errorf("compress layer: %w", err)
	}
	return tbuf.Bytes(), gbuf.Bytes(), nil
}

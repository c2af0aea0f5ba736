package imagegc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Upstream's defaults.
const (
	DefaultHighThresholdPercent = 85
	DefaultLowThresholdPercent  = 80
	DefaultMinAge               = 2 * time.Minute
	DefaultPeriod               = 5 * time.Minute
)

// StateFile is where the times are kept, under the kubelet's root directory.
const StateFile = "image_gc_state.json"

// Images is what the collector asks of the runtime's image service.
type Images interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
}

// Config is what the collector needs.
type Config struct {
	HighThresholdPercent, LowThresholdPercent int
	MinAge                                    time.Duration
	MaxAge                                    time.Duration // 0: no maximum age
	Period                                    time.Duration
	Images                                    Images
	// Containers lists every container of the runtime, running or not: their images are in use.
	Containers func(ctx context.Context) ([]*runtimeapi.Container, error)
	// VolumeImages, when set, names the images mounted as image volumes (volumes[].image) by the pods the
	// kubelet knows: in use too, though no container runs them.
	VolumeImages func() []string
	// Fs returns the image filesystem's capacity and available bytes.
	Fs func(ctx context.Context) (capacity, available int64, err error)
	// Keep names images never removed besides those the runtime pins (the pause image).
	Keep []string
	// RootDir holds StateFile; empty keeps the times in memory only.
	RootDir  string
	Recorder record.EventRecorder
	NodeRef  *v1.ObjectReference
	Clock    clock.WithTicker
}

// Manager is the image garbage collector. Build it with New, start it with Run.
type Manager struct {
	cfg Config

	mu      sync.Mutex // guards records and savedAt
	records map[string]imageRecord
	savedAt time.Time // when the times were last written
}

// detectPeriod is how often the images in use are noted between collections.
const detectPeriod = time.Minute

// saveEvery bounds how often last-used times alone are written (new and gone images are written at once).
const saveEvery = 5 * time.Minute

// New returns a collector for cfg with upstream's defaults where it is zero, and the times kept by the last
// run. The thresholds must be 0-100 with low <= high.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.HighThresholdPercent == 0 {
		cfg.HighThresholdPercent = DefaultHighThresholdPercent
	}
	if cfg.LowThresholdPercent == 0 {
		cfg.LowThresholdPercent = DefaultLowThresholdPercent
	}
	if err := Validate(cfg.HighThresholdPercent, cfg.LowThresholdPercent); err != nil {
		return nil, err
	}
	if cfg.MinAge == 0 {
		cfg.MinAge = DefaultMinAge
	}
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	m := &Manager{cfg: cfg, records: map[string]imageRecord{}}
	m.load(ctx)
	return m, nil
}

// Validate checks the thresholds as upstream does.
func Validate(high, low int) error {
	switch {
	case high < 0 || high > 100:
		return fmt.Errorf("--image-gc-high-threshold must be 0-100, got %d", high)
	case low < 0 || low > 100:
		return fmt.Errorf("--image-gc-low-threshold must be 0-100, got %d", low)
	case low > high:
		return fmt.Errorf("--image-gc-low-threshold (%d) must not be above --image-gc-high-threshold (%d)", low, high)
	}
	return nil
}

// Run notes the images there are at once (an image first seen now may go once the minimum age has passed),
// then the images in use every minute (last-used times are right within that), and collects every Period,
// until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	if _, err := m.detect(ctx); err != nil {
		klog.FromContext(ctx).V(2).Info("Image GC: unable to list images and containers", "err", err.Error())
	}
	detect := m.cfg.Clock.NewTicker(detectPeriod)
	defer detect.Stop()
	collect := m.cfg.Clock.NewTicker(m.cfg.Period)
	defer collect.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-detect.C():
			if _, err := m.detect(ctx); err != nil {
				klog.FromContext(ctx).V(2).Info("Image GC: unable to list images and containers", "err", err.Error())
			}
		case <-collect.C():
			if err := m.GarbageCollect(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "Image garbage collection failed")
				m.cfg.Recorder.Eventf(m.cfg.NodeRef, v1.EventTypeWarning, "ImageGCFailed", "%v", err)
			}
		}
	}
}

// detect lists the images and the containers, updates the times (an image in use is used now; one the
// runtime no longer has is forgotten) and returns the candidates.
func (m *Manager) detect(ctx context.Context) ([]candidate, error) {
	imgs, err := m.cfg.Images.ListImages(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	ctrs, err := m.cfg.Containers(ctx)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var volumeImages []string
	if m.cfg.VolumeImages != nil {
		volumeImages = m.cfg.VolumeImages()
	}
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	out := make([]candidate, 0, len(imgs))
	changed := now.Sub(m.savedAt) >= saveEvery
	for _, img := range imgs {
		id := img.GetId()
		seen[id] = true
		r, ok := m.records[id]
		if !ok {
			r.FirstDetected, changed = now, true
		}
		inUse := slices.ContainsFunc(ctrs, func(c *runtimeapi.Container) bool { return uses(c, img) }) ||
			slices.ContainsFunc(volumeImages, func(r string) bool { return names(img, r) })
		if inUse {
			r.LastUsed = now
		}
		m.records[id] = r
		out = append(out, candidate{id: id, size: int64(img.GetSize()), inUse: inUse, pinned: img.GetPinned() || m.kept(img), imageRecord: r})
	}
	for id := range m.records {
		if !seen[id] {
			delete(m.records, id)
			changed = true
		}
	}
	if changed {
		m.save(ctx)
	}
	return out, nil
}

// uses reports whether container c runs image img (by ID, name or digest).
func uses(c *runtimeapi.Container, img *runtimeapi.Image) bool {
	return slices.ContainsFunc([]string{c.GetImageRef(), c.GetImage().GetImage(), c.GetImageId()}, func(r string) bool { return names(img, r) })
}

// kept reports whether Config.Keep names img.
func (m *Manager) kept(img *runtimeapi.Image) bool {
	return slices.ContainsFunc(m.cfg.Keep, func(r string) bool { return names(img, r) })
}

// names reports whether ref is img's ID, one of its tags or one of its digests.
func names(img *runtimeapi.Image, ref string) bool {
	return ref != "" && (ref == img.GetId() || slices.Contains(img.GetRepoTags(), ref) || slices.Contains(img.GetRepoDigests(), ref))
}

// GarbageCollect removes images unused for longer than the maximum age, then, when the image filesystem is
// above the high threshold, unused images until it is down to the low one. Not enough to remove gives a
// FreeDiskSpaceFailed event.
func (m *Manager) GarbageCollect(ctx context.Context) error {
	cands, err := m.detect(ctx)
	if err != nil {
		return err
	}
	now := m.cfg.Clock.Now()
	if old := tooOld(cands, now, m.cfg.MinAge, m.cfg.MaxAge); len(old) > 0 {
		klog.FromContext(ctx).Info("Image GC: removing images unused for longer than the maximum age", "count", len(old), "maxAge", m.cfg.MaxAge)
		m.remove(ctx, old)
		if cands, err = m.detect(ctx); err != nil {
			return err
		}
	}
	capacity, available, err := m.cfg.Fs(ctx)
	if err != nil {
		return fmt.Errorf("image filesystem: %w", err)
	}
	want := toFree(capacity, available, m.cfg.HighThresholdPercent, m.cfg.LowThresholdPercent)
	if want == 0 {
		return nil
	}
	used := (capacity - available) * 100 / capacity
	klog.FromContext(ctx).Info("Image GC: image filesystem above the high threshold", "usage", fmt.Sprintf("%d%%", used),
		"highThreshold", m.cfg.HighThresholdPercent, "bytesToFree", want)
	if freed := m.free(ctx, cands, want); freed < want {
		msg := fmt.Sprintf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", want, freed)
		m.cfg.Recorder.Event(m.cfg.NodeRef, v1.EventTypeWarning, "FreeDiskSpaceFailed", msg)
		return errors.New(msg)
	}
	return nil
}

// DeleteUnused removes every unused image old enough to go (the eviction manager's reclaim under disk
// pressure), and returns the bytes freed.
func (m *Manager) DeleteUnused(ctx context.Context) (int64, error) {
	cands, err := m.detect(ctx)
	if err != nil {
		return 0, err
	}
	return m.free(ctx, cands, math.MaxInt64), nil
}

// free removes what choose picks to free want bytes, and returns the bytes removed.
func (m *Manager) free(ctx context.Context, cands []candidate, want int64) int64 {
	chosen, _ := choose(cands, m.cfg.Clock.Now(), m.cfg.MinAge, want)
	return m.remove(ctx, chosen)
}

// remove removes the images and returns the bytes of those removed; a removal that fails is logged and
// skipped (a container may have started on it meanwhile).
func (m *Manager) remove(ctx context.Context, cands []candidate) int64 {
	logger := klog.FromContext(ctx)
	var freed int64
	for _, c := range cands {
		if err := m.cfg.Images.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: c.id}); err != nil {
			logger.Info("Image GC: unable to remove image", "image", c.id, "err", err.Error())
			continue
		}
		logger.Info("Image GC: removed image", "image", c.id, "size", c.size, "lastUsed", c.LastUsed, "firstDetected", c.FirstDetected)
		freed += c.size
		m.mu.Lock()
		delete(m.records, c.id)
		m.mu.Unlock()
	}
	return freed
}

// load reads the times a previous run kept; a file that is missing or unreadable starts afresh (every image
// is then first seen now, which only delays its removal).
func (m *Manager) load(ctx context.Context) {
	if m.cfg.RootDir == "" {
		return
	}
	path := filepath.Join(m.cfg.RootDir, StateFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var recs map[string]imageRecord
	if err == nil {
		err = json.Unmarshal(data, &recs)
	}
	if err != nil {
		klog.FromContext(ctx).Info("Image GC: ignoring unreadable state; image times start afresh", "path", path, "err", err.Error())
		return
	}
	for id, r := range recs {
		if id != "" && !r.FirstDetected.IsZero() {
			m.records[id] = r
		}
	}
}

// save writes the times by a rename, so that a crash leaves the old file or the new one. Called with mu
// held.
func (m *Manager) save(ctx context.Context) {
	if m.cfg.RootDir == "" {
		return
	}
	path := filepath.Join(m.cfg.RootDir, StateFile)
	data, err := json.Marshal(m.records)
	if err == nil {
		tmp := path + ".tmp"
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		klog.FromContext(ctx).Info("Image GC: unable to save image times", "path", path, "err", err.Error())
		return
	}
	m.savedAt = m.cfg.Clock.Now()
}

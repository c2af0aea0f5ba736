package runtime

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/images"
	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestNameCache(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newNameCache(func() time.Time { return now })
	img := func(d string) []images.Image {
		return []images.Image{{Name: "docker.io/library/busybox:1.35", Target: ocispec.Descriptor{Digest: digest.Digest("sha256:" + d)}}}
	}
	const name = "docker.io/library/busybox:1.35"

	_, _, gen := c.get(name)
	c.put(name, img("a"), gen)
	if _, ok := mustGet(c, name); ok {
		t.Fatal("cached while image events are not followed")
	}

	c.follow(true)
	_, _, gen = c.get(name)
	c.put(name, img("a"), gen)
	if got, ok := mustGet(c, name); !ok || got[0].Target.Digest != "sha256:a" {
		t.Fatalf("get after put = %v, %v; want image a", got, ok)
	}
	// A change of any name drops what was cached by image ID: the ID may have lost or gained that name.
	const id = "sha256:0123"
	_, _, gen = c.get(id)
	c.put(id, img("a"), gen)
	c.drop("docker.io/library/other:1")
	if _, ok := mustGet(c, id); ok {
		t.Error("an ID entry survived a change of another name")
	}
	if _, ok := mustGet(c, name); !ok {
		t.Error("a change of another name dropped this name")
	}

	// A lookup that began before a drop stores nothing: its answer may predate the change.
	_, _, stale := c.get("other")
	c.drop(name)
	c.put("other", img("b"), stale)
	if _, ok := mustGet(c, "other"); ok {
		t.Error("a lookup begun before a drop was cached")
	}
	if _, ok := mustGet(c, name); ok {
		t.Error("a dropped name is still cached")
	}

	_, _, gen = c.get(name)
	c.put(name, img("c"), gen)
	now = now.Add(nameTTL)
	if _, ok := mustGet(c, name); ok {
		t.Error("an entry older than nameTTL was trusted")
	}

	_, _, gen = c.get(name)
	c.put(name, img("d"), gen)
	c.follow(false)
	if _, ok := mustGet(c, name); ok {
		t.Error("entries survived the end of the event watch")
	}
}

func mustGet(c *nameCache, key string) ([]images.Image, bool) {
	imgs, ok, _ := c.get(key)
	return imgs, ok
}

func TestNameCacheLookupSharesOneFetch(t *testing.T) {
	c := newNameCache(time.Now)
	c.follow(true)
	const key = "docker.io/library/busybox:1.35"
	want := []images.Image{{Name: key}}
	var fetches atomic.Int32
	release := make(chan struct{})
	fetch := func() ([]images.Image, error) {
		fetches.Add(1)
		<-release
		return want, nil
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := c.lookup(key, fetch); err != nil || len(got) != 1 {
				t.Errorf("lookup = %v, %v", got, err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // let the five join
	close(release)
	wg.Wait()
	if n := fetches.Load(); n != 1 {
		t.Errorf("five concurrent lookups fetched %d times, want 1", n)
	}
	if _, err := c.lookup(key, func() ([]images.Image, error) { t.Error("fetched a cached key"); return nil, nil }); err != nil {
		t.Error(err)
	}

	// After a drop, a lookup fetches anew even while one begun before the drop is still in flight.
	c.drop("docker.io/library/other:1")
	c.drop(key)
	slow := make(chan struct{})
	go func() { _, _ = c.lookup(key, func() ([]images.Image, error) { <-slow; return want, nil }) }()
	time.Sleep(20 * time.Millisecond)
	c.drop(key)
	fresh := []images.Image{{Name: key, Labels: map[string]string{"fresh": "true"}}}
	got, err := c.lookup(key, func() ([]images.Image, error) { return fresh, nil })
	close(slow)
	if err != nil || got[0].Labels["fresh"] != "true" {
		t.Errorf("lookup after a drop joined the lookup begun before it: %v, %v", got, err)
	}

	// Not followed: never cached, always fetched.
	c.follow(false)
	n := 0
	for range 2 {
		_, _ = c.lookup(key, func() ([]images.Image, error) { n++; return want, nil })
	}
	if n != 2 {
		t.Errorf("without image events, 2 lookups fetched %d times", n)
	}
}

package runtime

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/core/images"
	"golang.org/x/sync/singleflight"
)

// nameTTL bounds how long a cached image name is trusted without containerd confirming it. Image events
// keep the cache current; the bound covers an event missed while the subscription was being set up.
const nameTTL = 10 * time.Second

// nameCache remembers which images a name or a full image ID ("sha256:<hex>") stood for, so that the image
// lookups before every container start (the kubelet's ImageStatus by name, then CreateContainer's by ID) are
// not each a round trip to containerd, which a burst of pod starts keeps busy; a lookup by ID otherwise
// lists every image. It is only used while containerd's image events are followed: they, and this runtime's
// own pulls and removals, drop a name when it changes, and with it every ID entry (any change of a name may
// change the names an ID has). A lookup that started before a drop does not store its (possibly stale)
// answer. Concurrent lookups of one key share one round trip. Absent images are never cached. Safe for
// concurrent use.
type nameCache struct {
	mu    sync.Mutex
	names map[string]cachedName // nil while image events are not followed
	gen   uint64                // bumped on every drop: lookups begun before it store nothing
	now   func() time.Time

	flights singleflight.Group // by key and generation
}

type cachedName struct {
	imgs []images.Image
	at   time.Time
}

func newNameCache(now func() time.Time) *nameCache { return &nameCache{now: now} }

// lookup returns the images key stands for: cached, or from fetch (containerd), which it then caches. A
// lookup joins one in flight for the same key only if no drop came between their starts. An empty key
// (a lookup that is not cached) always fetches.
func (c *nameCache) lookup(key string, fetch func() ([]images.Image, error)) ([]images.Image, error) {
	imgs, ok, gen := c.get(key)
	if ok {
		return imgs, nil
	}
	if key == "" {
		return fetch()
	}
	fetchAndPut := func() ([]images.Image, error) {
		imgs, err := fetch()
		if err == nil {
			c.put(key, imgs, gen)
		}
		return imgs, err
	}
	v, err, shared := c.flights.Do(key+"@"+strconv.FormatUint(gen, 10), func() (any, error) { return fetchAndPut() })
	if err != nil && shared {
		return fetchAndPut() // the failure may be the other caller's (its context ended): try on our own
	}
	imgs, _ = v.([]images.Image)
	return imgs, err
}

// get returns the cached images of key, and the generation a lookup of key from containerd must pass to put.
func (c *nameCache) get(key string) ([]images.Image, bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.names[key]
	if ok && c.now().Sub(e.at) < nameTTL {
		return e.imgs, true, c.gen
	}
	return nil, false, c.gen
}

// put caches what containerd answered for key, unless something was dropped since the lookup began.
func (c *nameCache) put(key string, imgs []images.Image, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names == nil || gen != c.gen || len(imgs) == 0 {
		return
	}
	c.names[key] = cachedName{imgs: imgs, at: c.now()}
}

// drop forgets name (an image event named it, or this runtime pulled or removed it).
func (c *nameCache) drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.names, name)
	for k := range c.names {
		if strings.HasPrefix(k, "sha256:") {
			delete(c.names, k)
		}
	}
	c.gen++
}

// follow turns the cache on (image events are followed from now) or off (they no longer are), empty.
func (c *nameCache) follow(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names = nil
	if on {
		c.names = map[string]cachedName{}
	}
	c.gen++
}

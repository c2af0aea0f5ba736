package podsync

import (
	"context"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testclock "k8s.io/utils/clock/testing"
)

// slowImages blocks every pull until release is closed, and counts pulls in flight.
type slowImages struct {
	*critest.FakeImageService
	release chan struct{}
	mu      sync.Mutex
	now     map[string]int
	maxAll  int
	maxOne  int
	pulls   int
}

func (s *slowImages) PullImage(ctx context.Context, spec *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	s.mu.Lock()
	s.pulls++
	s.now[spec.Image]++
	total := 0
	for _, n := range s.now {
		total += n
	}
	s.maxAll, s.maxOne = max(s.maxAll, total), max(s.maxOne, s.now[spec.Image])
	s.mu.Unlock()
	<-s.release
	s.mu.Lock()
	s.now[spec.Image]--
	s.mu.Unlock()
	return s.FakeImageService.PullImage(ctx, spec, auth, sb)
}

func TestImagePullsShareAndLimit(t *testing.T) {
	imgs := &slowImages{FakeImageService: critest.NewFakeImageService(), release: make(chan struct{}), now: map[string]int{}}
	p := newImagePuller(imgs, nil, discardRecorder(), testclock.NewFakeClock(t0), 2)
	var wg sync.WaitGroup
	refs := make(chan string, 10)
	pull := func(image string) {
		defer wg.Done()
		ref, _, _, err := p.pull(context.Background(), &runtimeapi.ImageSpec{Image: image}, nil, nil)
		if err != nil {
			t.Error(err)
		}
		refs <- ref
	}
	for _, image := range []string{"a", "a", "a", "b", "c"} {
		wg.Add(1)
		go pull(image)
	}
	time.Sleep(100 * time.Millisecond)
	close(imgs.release)
	wg.Wait()
	close(refs)
	for ref := range refs {
		if ref == "" {
			t.Error("empty image ref")
		}
	}
	if imgs.pulls != 3 || imgs.maxOne != 1 || imgs.maxAll != 2 {
		t.Errorf("pulls %d, most of one image at once %d, most in total %d; want 3, 1, 2", imgs.pulls, imgs.maxOne, imgs.maxAll)
	}
}

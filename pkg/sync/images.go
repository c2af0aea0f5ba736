package podsync

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/kubelet/pkg/kubeclient"
	"github.com/nodeagent/kubelet/pkg/metrics"
	"github.com/nodeagent/kubelet/pkg/pullrecords"
	"github.com/nodeagent/kubelet/pkg/status"
)

// imagePuller makes sure a container's image is present, by its pull policy, pulling with the credentials of
// the pod's imagePullSecrets and the node's (each tried in turn; none: anonymous). Pulls of different images
// run in parallel up to a limit; one image is pulled once at a time (concurrent callers with the same
// credentials share the pull). Failed pulls back off per pod and image (ImagePullBackOff). Safe for
// concurrent use.
type imagePuller struct {
	images   cri.ImageManagerService
	client   kubeclient.Interface
	node     NodeCredentials // the node's own credentials, tried after the pod's pull secrets; nil: none
	recorder record.EventRecorder
	clock    clock.Clock
	sem      chan struct{}
	backoff  *Backoff
	// pulled, when set, is told how long each successful pull of a pod's image took.
	pulled func(types.UID, time.Duration)
	// debug, when set, records pulls for the debug page.
	debug *debugState
	// records, when set, keeps which credentials pulled each image; policy and allowlist say when a pod must
	// show its own (pull_records.go).
	records   *pullrecords.Store
	policy    pullrecords.Policy
	allowlist []string

	mu       sync.Mutex
	calls    map[string]*pullCall     // by image and credentials
	locks    map[string]chan struct{} // one pull per image at a time
	lastErrs map[string]string        // last pull error, by backoff key
}

type pullCall struct {
	done chan struct{}
	ref  string
	used int // the index of the credential that pulled; -1: anonymous
	err  error
}

func newImagePuller(images cri.ImageManagerService, client kubeclient.Interface, rec record.EventRecorder, clk clock.Clock, limit int) *imagePuller {
	return &imagePuller{
		images: images, client: client, recorder: rec, clock: clk, sem: make(chan struct{}, limit),
		backoff: NewBackoff(backoffInitial, backoffMax, backoffReset),
		calls:   map[string]*pullCall{}, locks: map[string]chan struct{}{}, lastErrs: map[string]string{},
	}
}

// ensureImage returns the image reference to create the container with, or why it cannot (a waiting reason
// for the status) and, on back-off, how long until the next try.
func (p *imagePuller) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sandbox *runtimeapi.PodSandboxConfig) (string, *status.Waiting, time.Duration) {
	return p.ensure(ctx, pod, containerRef(pod, c), c.Image, c.ImagePullPolicy, sandbox)
}

// ensureVolumeImage is ensureImage for an image volume (volumes[].image): the volume's reference and pull
// policy, the pod's credentials, events on the pod, as upstream pulls them.
func (p *imagePuller) ensureVolumeImage(ctx context.Context, pod *v1.Pod, vol *v1.ImageVolumeSource, sandbox *runtimeapi.PodSandboxConfig) (string, *status.Waiting, time.Duration) {
	return p.ensure(ctx, pod, podRef(pod, ""), vol.Reference, vol.PullPolicy, sandbox)
}

// ensure makes sure userImage is present by policy (empty: the API's default for it), with events on ref.
func (p *imagePuller) ensure(ctx context.Context, pod *v1.Pod, ref *v1.ObjectReference, userImage string, policy v1.PullPolicy, sandbox *runtimeapi.PodSandboxConfig) (string, *status.Waiting, time.Duration) {
	image, err := normalizeImage(userImage)
	if err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: %v", userImage, err)
		p.recorder.Event(ref, v1.EventTypeWarning, status.ReasonInvalidImageName, msg)
		return "", &status.Waiting{Reason: status.ReasonInvalidImageName, Message: msg}, 0
	}
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: userImage}
	if policy == "" {
		policy = defaultPullPolicy(image)
	}
	if policy != v1.PullAlways {
		present, err := p.images.ImageStatus(ctx, spec, false)
		if err != nil {
			msg := fmt.Sprintf("Failed to inspect image %q: %v", userImage, err)
			p.recorder.Event(ref, v1.EventTypeWarning, eventInspectFailed, msg)
			return "", &status.Waiting{Reason: "ImageInspectError", Message: msg}, 0
		}
		if img := present.GetImage(); img != nil {
			if p.mayUse(ctx, pod, image, imageID(img, image)) {
				if policy == v1.PullIfNotPresent {
					p.recorder.Eventf(ref, v1.EventTypeNormal, eventPulled, "Container image %q already present on machine", userImage)
				}
				return imageID(img, image), nil, 0
			}
			if policy == v1.PullNever {
				msg := fmt.Sprintf("Container image %q is present with pull policy of Never but does not have the proper credentials", userImage)
				p.recorder.Event(ref, v1.EventTypeWarning, eventErrImageNeverPull, msg)
				return "", &status.Waiting{Reason: status.ReasonErrImageNeverPull, Message: msg}, 0
			}
			// IfNotPresent: pulled again with the pod's own credentials, which the registry then checks.
		}
		if policy == v1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", userImage)
			p.recorder.Event(ref, v1.EventTypeWarning, eventErrImageNeverPull, msg)
			return "", &status.Waiting{Reason: status.ReasonErrImageNeverPull, Message: msg}, 0
		}
	}

	key := string(pod.UID) + "/" + image
	if left := p.backoff.Remaining(key, p.clock.Now()); left > 0 {
		p.recorder.Eventf(ref, v1.EventTypeNormal, eventBackOff, "Back-off pulling image %q", userImage)
		p.mu.Lock()
		last := p.lastErrs[key]
		p.mu.Unlock()
		msg := fmt.Sprintf("Back-off pulling image %q: %s: %s", userImage, status.ReasonErrImagePull, last)
		return "", &status.Waiting{Reason: status.ReasonImagePullBackOff, Message: msg}, left
	}

	p.recorder.Eventf(ref, v1.EventTypeNormal, eventPulling, "Pulling image %q", userImage)
	start := p.clock.Now()
	if p.debug != nil {
		p.debug.pulling(pod.UID, userImage, start)
		defer p.debug.pulling(pod.UID, userImage, time.Time{})
	}
	var imageRef string
	var waited time.Duration
	tracked, err := p.credentials(ctx, pod, image)
	if err == nil {
		p.startPull(ctx, image)
		var used int
		imageRef, waited, used, err = p.pull(ctx, spec, authsOf(tracked), sandbox)
		p.endPull(ctx, image, imageRef, tracked, used)
	}
	if err != nil {
		p.backoff.Next(key, p.clock.Now())
		p.mu.Lock()
		p.lastErrs[key] = err.Error()
		p.mu.Unlock()
		msg := fmt.Sprintf("Failed to pull image %q: %v", userImage, err)
		p.recorder.Event(ref, v1.EventTypeWarning, eventFailed, msg)
		p.recorder.Eventf(ref, v1.EventTypeWarning, eventFailed, "Error: %s", status.ReasonErrImagePull)
		// Sync again soon, to show ImagePullBackOff while the back-off runs.
		return "", &status.Waiting{Reason: status.ReasonErrImagePull, Message: msg}, time.Second
	}
	took := p.clock.Since(start)
	size := uint64(0)
	if st, err := p.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: imageRef}, false); err == nil && st.GetImage() != nil {
		size = st.GetImage().Size
	}
	p.recorder.Eventf(ref, v1.EventTypeNormal, eventPulled, "Successfully pulled image %q in %v (%v including waiting). Image size: %d bytes.",
		userImage, (took - waited).Round(time.Millisecond), took.Round(time.Millisecond), size)
	metrics.ImagePullDuration.WithLabelValues(metrics.ImageSizeBucket(size)).Observe((took - waited).Seconds())
	if p.debug != nil {
		p.debug.step(pod.UID, "pull "+userImage, fmt.Sprintf("%d bytes, %v waiting", size, waited.Round(time.Millisecond)), start, start.Add(took))
	}
	if p.pulled != nil {
		p.pulled(pod.UID, took)
	}
	return imageRef, nil, 0
}

// pull pulls spec once per image at a time, trying each credential in turn. It returns the image reference,
// how long it waited for another pull of the same image or a free slot, and which of auths pulled it (-1:
// none was given, the pull was anonymous).
func (p *imagePuller) pull(ctx context.Context, spec *runtimeapi.ImageSpec, auths []*runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, time.Duration, int, error) {
	key := spec.Image + "\x00" + authKey(auths)
	start := p.clock.Now()
	p.mu.Lock()
	if call, ok := p.calls[key]; ok {
		p.mu.Unlock()
		select {
		case <-call.done:
			return call.ref, p.clock.Since(start), call.used, call.err
		case <-ctx.Done():
			return "", 0, -1, ctx.Err()
		}
	}
	call := &pullCall{done: make(chan struct{})}
	p.calls[key] = call
	lock, ok := p.locks[spec.Image]
	if !ok {
		lock = make(chan struct{}, 1)
		p.locks[spec.Image] = lock
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.calls, key)
		p.mu.Unlock()
		close(call.done)
	}()

	select {
	case lock <- struct{}{}:
	case <-ctx.Done():
		call.err = ctx.Err()
		return "", 0, -1, call.err
	}
	defer func() { <-lock }()
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		call.err = ctx.Err()
		return "", 0, -1, call.err
	}
	defer func() { <-p.sem }()
	waited := p.clock.Since(start)

	tries := auths
	if len(tries) == 0 {
		tries = []*runtimeapi.AuthConfig{nil}
	}
	var errs []error
	for i, auth := range tries {
		ref, err := p.images.PullImage(ctx, spec, auth, sandbox)
		if err == nil {
			call.ref, call.used = ref, i
			if len(auths) == 0 {
				call.used = -1
			}
			return ref, waited, call.used, nil
		}
		errs = append(errs, err)
	}
	call.err = errors.Join(errs...)
	return "", waited, -1, call.err
}

// forgetPod drops the pull back-off state of a pod.
func (p *imagePuller) forgetPod(uid types.UID) {
	prefix := string(uid) + "/"
	p.backoff.DeletePrefix(prefix)
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.lastErrs {
		if strings.HasPrefix(k, prefix) {
			delete(p.lastErrs, k)
		}
	}
}

// normalizeImage returns the fully qualified image name with the default tag, or an error for a name that
// does not parse.
func normalizeImage(image string) (string, error) {
	if image == "" {
		return "", errors.New("empty image name")
	}
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", err
	}
	return reference.TagNameOnly(named).String(), nil
}

// defaultPullPolicy is the API's default: Always for :latest (or no tag), IfNotPresent otherwise.
func defaultPullPolicy(image string) v1.PullPolicy {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return v1.PullIfNotPresent
	}
	if _, digested := named.(reference.Digested); digested {
		return v1.PullIfNotPresent
	}
	if tagged, ok := named.(reference.Tagged); !ok || tagged.Tag() == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

func imageID(img *runtimeapi.Image, fallback string) string {
	if img.Id != "" {
		return img.Id
	}
	return fallback
}

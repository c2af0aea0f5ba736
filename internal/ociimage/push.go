package ociimage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/distribution/reference"
)

// ErrUnauthorized is returned (wrapped) when the registry refuses the
// credentials, or asks for some and none were given.
var ErrUnauthorized = errors.New("registry refused access")

// PushOption changes how Push talks to the registry.
type PushOption func(*registryClient)

// WithHTTPClient makes Push use c, for example one that trusts a test CA.
func WithHTTPClient(c *http.Client) PushOption {
	return func(rc *registryClient) { rc.http = c }
}

// Push uploads the image to a distribution v2 registry at registryURL (for
// example "http://127.0.0.1:5000") as repo:tag, with the plain registry API:
// each blob the registry lacks goes up in one POST+PUT, then the manifest is
// PUT under the tag. auth may be nil. Basic auth and token (bearer)
// challenges are both answered.
func (img *Image) Push(ctx context.Context, registryURL, repo, tag string, auth *BasicAuth, opts ...PushOption) error {
	base, err := url.Parse(registryURL)
	if err != nil {
		return fmt.Errorf("registry URL %q: %w", registryURL, err)
	}
	if (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("registry URL %q: want http(s)://host[:port]", registryURL)
	}
	named, err := reference.WithName(repo)
	if err != nil {
		return fmt.Errorf("repository %q: %w", repo, err)
	}
	if _, err := reference.WithTag(named, tag); err != nil {
		return fmt.Errorf("tag %q: %w", tag, err)
	}
	c := &registryClient{http: http.DefaultClient, base: base, repo: repo, auth: auth}
	for _, o := range opts {
		o(c)
	}

	for _, b := range []Blob{img.Layer, img.Config} {
		if err := c.pushBlob(ctx, b); err != nil {
			return fmt.Errorf("push %s to %s/%s: %w", b.Descriptor.Digest, base.Host, repo, err)
		}
	}
	if err := c.putManifest(ctx, tag, img.Manifest); err != nil {
		return fmt.Errorf("push manifest %s:%s to %s: %w", repo, tag, base.Host, err)
	}
	return nil
}

// registryClient speaks the registry API for one repository. It remembers
// the Authorization header that last worked.
type registryClient struct {
	http       *http.Client
	base       *url.URL
	repo       string
	auth       *BasicAuth
	authHeader string
}

func (c *registryClient) url(p string) string {
	u := *c.base
	u.Path = "/v2/" + c.repo + p
	u.RawQuery = ""
	return u.String()
}

func (c *registryClient) pushBlob(ctx context.Context, b Blob) error {
	d := b.Descriptor.Digest
	resp, err := c.do(ctx, http.MethodHead, c.url("/blobs/"+d.String()), nil, "")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	if resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("check blob: %s", resp.Status)
	}

	resp, err = c.do(ctx, http.MethodPost, c.url("/blobs/uploads/"), nil, "")
	if err != nil {
		return err
	}
	if err := expect(resp, http.StatusAccepted, "start upload"); err != nil {
		return err
	}
	loc, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
	if err != nil || resp.Header.Get("Location") == "" {
		return fmt.Errorf("start upload: bad Location %q", resp.Header.Get("Location"))
	}
	q := loc.Query()
	q.Set("digest", d.String())
	loc.RawQuery = q.Encode()

	resp, err = c.do(ctx, http.MethodPut, loc.String(), b.Data, "application/octet-stream")
	if err != nil {
		return err
	}
	return expect(resp, http.StatusCreated, "upload blob")
}

func (c *registryClient) putManifest(ctx context.Context, tag string, m Blob) error {
	resp, err := c.do(ctx, http.MethodPut, c.url("/manifests/"+tag), m.Data, m.Descriptor.MediaType)
	if err != nil {
		return err
	}
	if err := expect(resp, http.StatusCreated, "put manifest"); err != nil {
		return err
	}
	if got := resp.Header.Get("Docker-Content-Digest"); got != "" && got != m.Descriptor.Digest.String() {
		return fmt.Errorf("registry stored manifest as %s, want %s", got, m.Descriptor.Digest)
	}
	return nil
}

// do sends one request. On 401 it answers the challenge and retries once.
func (c *registryClient) do(ctx context.Context, method, u string, body []byte, contentType string) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, u, err)
		}
		if body == nil {
			req.Body, req.GetBody = http.NoBody, nil
		}
		req.ContentLength = int64(len(body))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if body != nil {
			req.Header.Set("Content-Length", strconv.Itoa(len(body)))
		}
		if c.authHeader != "" {
			req.Header.Set("Authorization", c.authHeader)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, u, err)
		}
		if resp.StatusCode != http.StatusUnauthorized {
			return resp, nil
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if attempt > 0 {
			return nil, fmt.Errorf("%s %s: %w: %s", method, u, ErrUnauthorized, snippet(msg))
		}
		ch, err := parseChallenge(resp.Header.Get("WWW-Authenticate"))
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w: %w", method, u, ErrUnauthorized, err)
		}
		h, err := c.authorize(ctx, ch)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w: %w", method, u, ErrUnauthorized, err)
		}
		c.authHeader = h
	}
}

// expect checks the status of a response and closes its body.
func expect(resp *http.Response, want int, what string) error {
	defer resp.Body.Close()
	if resp.StatusCode == want {
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return fmt.Errorf("%s: %s: %s", what, resp.Status, snippet(msg))
}

package ociimage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// fakeRegistry is a small in-memory distribution v2 registry. auth is "",
// "basic" or "bearer"; bearer tokens come from /token with basic auth.
type fakeRegistry struct {
	auth, user, pass string
	badDigestHeader  bool

	mu        sync.Mutex
	blobs     map[string][]byte
	manifests map[string][]byte
	requests  []string
	uploads   int
}

const fakeToken = "tok-123"

func newFakeRegistry(auth string) (*fakeRegistry, *httptest.Server) {
	r := &fakeRegistry{auth: auth, user: "alice", pass: "s3cret", blobs: map[string][]byte{}, manifests: map[string][]byte{}}
	srv := httptest.NewServer(r)
	return r, srv
}

func (r *fakeRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, req.Method+" "+req.URL.Path)

	if req.URL.Path == "/token" {
		if u, p, ok := req.BasicAuth(); !ok || u != r.user || p != r.pass {
			http.Error(w, "bad credentials", http.StatusUnauthorized)
			return
		}
		if got := req.URL.Query().Get("scope"); got != "repository:team/app:pull,push" {
			http.Error(w, "scope "+got, http.StatusBadRequest)
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"token": fakeToken})
		return
	}
	if !r.authorized(w, req) {
		return
	}
	body, _ := io.ReadAll(req.Body)
	p := strings.TrimPrefix(req.URL.Path, "/v2/")
	switch {
	case req.Method == http.MethodHead && strings.Contains(p, "/blobs/sha256:"):
		d := p[strings.LastIndex(p, "/")+1:]
		if _, ok := r.blobs[d]; !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusOK)
	case req.Method == http.MethodPost && strings.HasSuffix(p, "/blobs/uploads/"):
		r.uploads++
		w.Header().Set("Location", fmt.Sprintf("/v2/%suuid-%d?_state=abc", p, r.uploads))
		w.WriteHeader(http.StatusAccepted)
	case req.Method == http.MethodPut && strings.Contains(p, "/blobs/uploads/uuid-"):
		d := req.URL.Query().Get("digest")
		if req.URL.Query().Get("_state") != "abc" || digest.FromBytes(body).String() != d {
			http.Error(w, "digest invalid", http.StatusBadRequest)
			return
		}
		r.blobs[d] = body
		w.WriteHeader(http.StatusCreated)
	case req.Method == http.MethodPut && strings.Contains(p, "/manifests/"):
		if req.Header.Get("Content-Type") != ocispec.MediaTypeImageManifest {
			http.Error(w, "manifest invalid", http.StatusBadRequest)
			return
		}
		var m ocispec.Manifest
		if err := json.Unmarshal(body, &m); err != nil {
			http.Error(w, "manifest invalid", http.StatusBadRequest)
			return
		}
		for _, d := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
			if _, ok := r.blobs[d.Digest.String()]; !ok {
				http.Error(w, "blob unknown "+d.Digest.String(), http.StatusBadRequest)
				return
			}
		}
		i := strings.Index(p, "/manifests/")
		r.manifests[p[:i]+":"+p[i+len("/manifests/"):]] = body
		dg := digest.FromBytes(body).String()
		if r.badDigestHeader {
			dg = digest.FromString("other").String()
		}
		w.Header().Set("Docker-Content-Digest", dg)
		w.WriteHeader(http.StatusCreated)
	default:
		http.Error(w, "unexpected "+req.Method+" "+req.URL.Path, http.StatusNotFound)
	}
}

func (r *fakeRegistry) authorized(w http.ResponseWriter, req *http.Request) bool {
	switch r.auth {
	case "basic":
		if u, p, ok := req.BasicAuth(); ok && u == r.user && p == r.pass {
			return true
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="fake"`)
	case "bearer":
		if req.Header.Get("Authorization") == "Bearer "+fakeToken {
			return true
		}
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="http://%s/token",service="fake",scope="repository:team/app:pull"`, req.Host))
	default:
		return true
	}
	http.Error(w, `{"errors":[{"code":"UNAUTHORIZED"}]}`, http.StatusUnauthorized)
	return false
}

func TestPush(t *testing.T) {
	good := &BasicAuth{Username: "alice", Password: "s3cret"}
	bad := &BasicAuth{Username: "alice", Password: "wrong"}
	tests := []struct {
		name        string
		auth        string
		creds       *BasicAuth
		preloaded   bool // the layer is already in the registry
		badDigest   bool
		wantErr     error
		wantErrText string
		wantUploads int
	}{
		{name: "anonymous", wantUploads: 2},
		{name: "basic", auth: "basic", creds: good, wantUploads: 2},
		{name: "basic without credentials", auth: "basic", wantErr: ErrUnauthorized},
		{name: "basic with wrong password", auth: "basic", creds: bad, wantErr: ErrUnauthorized},
		{name: "bearer token", auth: "bearer", creds: good, wantUploads: 2},
		{name: "bearer with wrong password", auth: "bearer", creds: bad, wantErr: ErrUnauthorized},
		{name: "layer already present", preloaded: true, wantUploads: 1},
		{name: "manifest digest mismatch", badDigest: true, wantErrText: "stored manifest as"},
	}
	img, err := Build(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg, srv := newFakeRegistry(tt.auth)
			defer srv.Close()
			reg.badDigestHeader = tt.badDigest
			if tt.preloaded {
				reg.blobs[img.Layer.Descriptor.Digest.String()] = img.Layer.Data
			}
			err := img.Push(context.Background(), srv.URL, "team/app", "v1", tt.creds)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			case tt.wantErrText != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErrText) {
					t.Fatalf("err = %v, want %q", err, tt.wantErrText)
				}
				return
			case err != nil:
				t.Fatalf("push: %v (requests %v)", err, reg.requests)
			}
			if reg.uploads != tt.wantUploads {
				t.Errorf("uploads = %d, want %d", reg.uploads, tt.wantUploads)
			}
			if got := reg.manifests["team/app:v1"]; string(got) != string(img.Manifest.Data) {
				t.Errorf("stored manifest = %s", got)
			}
			for _, b := range []Blob{img.Layer, img.Config} {
				if string(reg.blobs[b.Descriptor.Digest.String()]) != string(b.Data) {
					t.Errorf("blob %s not stored intact", b.Descriptor.Digest)
				}
			}
		})
	}
}

func TestPushBadArguments(t *testing.T) {
	img, err := Build(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, url, repo, tag string }{
		{"no scheme", "127.0.0.1:5000", "a", "v1"},
		{"ftp", "ftp://127.0.0.1", "a", "v1"},
		{"bad repo", "http://127.0.0.1:1", "A B", "v1"},
		{"bad tag", "http://127.0.0.1:1", "a", "v 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := img.Push(context.Background(), tt.url, tt.repo, tt.tag, nil); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestParseChallenge(t *testing.T) {
	tests := []struct {
		in      string
		want    challenge
		wantErr bool
	}{
		{in: `Basic realm="Registry Realm"`, want: challenge{"basic", map[string]string{"realm": "Registry Realm"}}},
		{
			in:   `Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push"`,
			want: challenge{"bearer", map[string]string{"realm": "https://auth.example/token", "service": "registry.example", "scope": "repository:a/b:pull,push"}},
		},
		{in: `Bearer realm=http://x/token, service=reg`, want: challenge{"bearer", map[string]string{"realm": "http://x/token", "service": "reg"}}},
		{in: `Basic realm="a \"quoted\" realm"`, want: challenge{"basic", map[string]string{"realm": `a "quoted" realm`}}},
		{in: `Basic`, want: challenge{"basic", map[string]string{}}},
		{in: ``, wantErr: true},
		{in: `Basic realm="open`, wantErr: true},
		{in: `Basic realm`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseChallenge(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

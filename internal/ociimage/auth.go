package ociimage

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// BasicAuth holds registry credentials. They are sent as HTTP basic auth,
// or traded for a bearer token when the registry asks for one.
type BasicAuth struct {
	Username string
	Password string
}

// challenge is one parsed WWW-Authenticate challenge.
type challenge struct {
	scheme string // lower case: "basic" or "bearer"
	params map[string]string
}

// parseChallenge reads the first challenge of a WWW-Authenticate header:
// a scheme followed by comma-separated key=value or key="quoted value" pairs.
func parseChallenge(h string) (challenge, error) {
	h = strings.TrimSpace(h)
	scheme, rest, _ := strings.Cut(h, " ")
	if scheme == "" {
		return challenge{}, fmt.Errorf("empty WWW-Authenticate header")
	}
	c := challenge{scheme: strings.ToLower(scheme), params: map[string]string{}}
	s := strings.TrimSpace(rest)
	for s != "" {
		key, after, ok := strings.Cut(s, "=")
		if !ok {
			return challenge{}, fmt.Errorf("WWW-Authenticate %q: parameter without value", h)
		}
		key = strings.ToLower(strings.TrimSpace(key))
		var val string
		if strings.HasPrefix(after, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(after) && after[i] != '"'; i++ {
				if after[i] == '\\' && i+1 < len(after) {
					i++
				}
				b.WriteByte(after[i])
			}
			if i >= len(after) {
				return challenge{}, fmt.Errorf("WWW-Authenticate %q: unterminated quote", h)
			}
			val, s = b.String(), after[i+1:]
		} else {
			val, s, _ = strings.Cut(after, ",")
		}
		c.params[key] = strings.TrimSpace(val)
		s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), ","))
	}
	return c, nil
}

// authorize answers a challenge with the value of an Authorization header.
func (c *registryClient) authorize(ctx context.Context, ch challenge) (string, error) {
	switch ch.scheme {
	case "basic":
		if c.auth == nil {
			return "", fmt.Errorf("registry asks for basic auth and no credentials were given")
		}
		req, _ := http.NewRequest(http.MethodGet, "/", nil)
		req.SetBasicAuth(c.auth.Username, c.auth.Password)
		return req.Header.Get("Authorization"), nil
	case "bearer":
		token, err := c.fetchToken(ctx, ch.params)
		if err != nil {
			return "", err
		}
		return "Bearer " + token, nil
	default:
		return "", fmt.Errorf("unsupported auth scheme %q", ch.scheme)
	}
}

// fetchToken gets a bearer token from the token server named in a challenge,
// asking for pull and push on the repository.
func (c *registryClient) fetchToken(ctx context.Context, params map[string]string) (string, error) {
	realm := params["realm"]
	if realm == "" {
		return "", fmt.Errorf("bearer challenge without realm")
	}
	u, err := url.Parse(realm)
	if err != nil {
		return "", fmt.Errorf("bearer realm %q: %w", realm, err)
	}
	q := u.Query()
	if svc := params["service"]; svc != "" {
		q.Set("service", svc)
	}
	q.Set("scope", "repository:"+c.repo+":pull,push")
	u.RawQuery = q.Encode()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("token request: %w", err)
	}
	if c.auth != nil {
		req.SetBasicAuth(c.auth.Username, c.auth.Password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("token request: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("token request: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("token request: %s: %s", resp.Status, snippet(body))
	}
	var tr struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &tr); err != nil {
		return "", fmt.Errorf("token response: %w", err)
	}
	if tr.Token != "" {
		return tr.Token, nil
	}
	if tr.AccessToken != "" {
		return tr.AccessToken, nil
	}
	return "", fmt.Errorf("token response holds no token")
}

// snippet shortens a response body for an error message.
func snippet(b []byte) string {
	const max = 300
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}

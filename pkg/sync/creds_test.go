package podsync

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestMatchCredentials(t *testing.T) {
	secret := func(auths map[string]dockerConfigEntry) *v1.Secret {
		b, _ := json.Marshal(map[string]any{"auths": auths})
		return &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: b}}
	}
	basic := base64.StdEncoding.EncodeToString([]byte("alice:pw"))
	secrets := []*v1.Secret{
		secret(map[string]dockerConfigEntry{
			"127.0.0.1:5000":                       {Auth: basic},
			"https://index.docker.io/v1/":          {Username: "hub", Password: "hubpw"},
			"registry.example.com":                 {Username: "any", Password: "1"},
			"registry.example.com/team":            {Username: "team", Password: "2"},
			"https://other.example.com:8443/v2/":   {IdentityToken: "tok"},
			"registry.example.com/team-not-prefix": {Username: "wrong", Password: "3"},
		}),
		{Type: v1.SecretTypeOpaque, Data: map[string][]byte{"x": []byte("y")}},
		{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte("{not json")}},
	}
	for _, tt := range []struct {
		image string
		users []string
	}{
		{"127.0.0.1:5000/e2e/app:1", []string{"alice"}},
		{"busybox", []string{"hub"}},
		{"docker.io/library/busybox:1.36", []string{"hub"}},
		{"registry.example.com/team/app", []string{"team", "any"}},
		{"registry.example.com/teamx/app", []string{"any"}},
		{"other.example.com:8443/app", []string{""}},
		{"unknown.example.com/app", nil},
		{"UPPER/case", nil}, // not a valid reference: no credentials, no panic
	} {
		auths := matchCredentials(secrets, tt.image)
		var users []string
		for _, a := range auths {
			users = append(users, a.Username)
			if a.ServerAddress != "" {
				t.Errorf("%s: ServerAddress %q; containerd's CRI plugin drops credentials whose address it cannot match", tt.image, a.ServerAddress)
			}
			if a.Username == "alice" && a.Password != "pw" {
				t.Errorf("%s: auth field decoded to password %q", tt.image, a.Password)
			}
		}
		if len(users) != len(tt.users) {
			t.Errorf("%s: credentials of %q, want %q", tt.image, users, tt.users)
			continue
		}
		for i := range users {
			if users[i] != tt.users[i] {
				t.Errorf("%s: credentials of %q, want %q", tt.image, users, tt.users)
				break
			}
		}
	}
}

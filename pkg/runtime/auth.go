package runtime

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// decodeAuth decodes a docker config "auth" field: base64 of "user:password".
func decodeAuth(s string) (string, string, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", "", fmt.Errorf("decode auth: %w", err)
	}
	user, pass, ok := strings.Cut(string(b), ":")
	if !ok {
		return "", "", fmt.Errorf("decode auth: no colon in user:password")
	}
	return user, pass, nil
}

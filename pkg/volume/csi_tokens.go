package volume

import (
	"context"
	"encoding/json"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// csiTokensKey carries the pod's service account tokens a CSIDriver asks for (tokenRequests), as upstream
// passes them: JSON of {audience: {"token": ..., "expirationTimestamp": ...}}.
const csiTokensKey = "csi.storage.k8s.io/serviceAccount.tokens"

// csiTokens requests, for the pod's service account, a token bound to the pod for each of the CSIDriver's
// tokenRequests (from the kubelet's token cache, renewed as projected tokens are), and returns them in
// upstream's form; "" when the driver asks for none.
func (m *Manager) csiTokens(ctx context.Context, pod *v1.Pod, obj *storagev1.CSIDriver) (string, error) {
	if obj == nil || len(obj.Spec.TokenRequests) == 0 {
		return "", nil
	}
	if m.cfg.API == nil {
		return "", fmt.Errorf("CSI driver %s asks for service account tokens, and there is no API server to request them from", obj.Name)
	}
	out := map[string]authenticationv1.TokenRequestStatus{}
	for _, r := range obj.Spec.TokenRequests {
		tr, err := m.tokens.request(ctx, m.cfg.API, pod, &v1.ServiceAccountTokenProjection{Audience: r.Audience, ExpirationSeconds: r.ExpirationSeconds})
		if err != nil {
			return "", fmt.Errorf("CSI driver %s: %w", obj.Name, err)
		}
		out[r.Audience] = tr.Status
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// withKey returns m (a copy) with key set to val.
func withKey(m map[string]string, key, val string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out[key] = val
	return out
}

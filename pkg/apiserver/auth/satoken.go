package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	serviceaccountinfo "k8s.io/apiserver/pkg/authentication/serviceaccount"

	"github.com/nodeagent/kubelet/pkg/apiserver/request"
	"github.com/nodeagent/kubelet/pkg/apiserver/rest"
)

// CredentialIDKey is the user extra key naming the credential a request was
// authenticated with, as kube-apiserver's.
const CredentialIDKey = "authentication.kubernetes.io/credential-id"

// tokenClaims are the claims of a service account token, as kube-apiserver
// writes them (pkg/serviceaccount/claims.go): the registered JWT claims and
// the private "kubernetes.io" claim.
type tokenClaims struct {
	Issuer     string            `json:"iss,omitempty"`
	Subject    string            `json:"sub,omitempty"`
	Audience   audience          `json:"aud,omitempty"`
	Expiry     *numericDate      `json:"exp,omitempty"`
	NotBefore  *numericDate      `json:"nbf,omitempty"`
	IssuedAt   *numericDate      `json:"iat,omitempty"`
	ID         string            `json:"jti,omitempty"`
	Kubernetes *kubernetesClaims `json:"kubernetes.io,omitempty"`
}

type kubernetesClaims struct {
	Namespace      string     `json:"namespace,omitempty"`
	ServiceAccount objectRef  `json:"serviceaccount"`
	Pod            *objectRef `json:"pod,omitempty"`
	Secret         *objectRef `json:"secret,omitempty"`
	Node           *objectRef `json:"node,omitempty"`
}

type objectRef struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// audience is the "aud" claim: written as an array, read from a string or
// an array (RFC 7519 4.1.3).
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("aud: %w", err)
	}
	*a = many
	return nil
}

// numericDate is seconds since the epoch, written as an integer and read
// from any JSON number.
type numericDate int64

func newNumericDate(t time.Time) *numericDate {
	n := numericDate(t.Unix())
	return &n
}

func (n numericDate) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatInt(int64(n), 10)), nil
}

func (n *numericDate) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > math.MaxInt64/2 || f < math.MinInt64/2 {
		return errors.New("invalid numeric date")
	}
	*n = numericDate(f)
	return nil
}

func (n *numericDate) time() time.Time { return time.Unix(int64(*n), 0) }

// newTokenClaims returns the claims of a token for subj, valid from now for
// expiration, for the given audiences, with ID jti: kube-apiserver's Claims.
func newTokenClaims(issuer string, subj rest.TokenSubject, audiences []string, now time.Time, expiration time.Duration, jti string) (*tokenClaims, error) {
	sa := subj.ServiceAccount
	if sa == nil {
		return nil, errors.New("a token needs a service account")
	}
	if subj.Secret != nil && (subj.Pod != nil || subj.Node != nil) {
		return nil, errors.New("internal error, token can only be bound to one object type")
	}
	c := &tokenClaims{
		Issuer:    issuer,
		Subject:   serviceaccountinfo.MakeUsername(sa.Namespace, sa.Name),
		Audience:  append(audience(nil), audiences...),
		IssuedAt:  newNumericDate(now),
		NotBefore: newNumericDate(now),
		Expiry:    newNumericDate(now.Add(expiration)),
		ID:        jti,
		Kubernetes: &kubernetesClaims{Namespace: sa.Namespace,
			ServiceAccount: objectRef{Name: sa.Name, UID: string(sa.UID)}},
	}
	k := c.Kubernetes
	switch {
	case subj.Pod != nil:
		k.Pod = &objectRef{Name: subj.Pod.Name, UID: string(subj.Pod.UID)}
		if subj.Node != nil {
			k.Node = &objectRef{Name: subj.Node.Name, UID: string(subj.Node.UID)}
		}
	case subj.Secret != nil:
		k.Secret = &objectRef{Name: subj.Secret.Name, UID: string(subj.Secret.UID)}
	case subj.Node != nil:
		k.Node = &objectRef{Name: subj.Node.Name, UID: string(subj.Node.UID)}
	}
	return c, nil
}

// ObjectGetter reads the objects a token's validity depends on. A missing
// object is an error (the store's NotFound). Implementations are safe for
// concurrent use.
type ObjectGetter interface {
	ServiceAccount(namespace, name string) (*corev1.ServiceAccount, error)
	Pod(namespace, name string) (*corev1.Pod, error)
	Secret(namespace, name string) (*corev1.Secret, error)
	Node(name string) (*corev1.Node, error)
}

// tokenLeeway is the clock skew tolerated on a token's times, and how long
// after its deletion an object still validates the tokens bound to it, as
// kube-apiserver's (go-jose's DefaultLeeway).
const tokenLeeway = time.Minute

// errTokenInvalidated is kube-apiserver's answer for a token whose bound
// object is gone.
var errTokenInvalidated = errors.New("service account token has been invalidated")

// serviceAccountInfo is who a valid token speaks for.
type serviceAccountInfo struct {
	Namespace, Name, UID string
	PodName, PodUID      string
	NodeName, NodeUID    string
	CredentialID         string
}

// validateTokenClaims checks a verified token's times at now and that the
// objects it names still exist with the same UIDs (not deleted more than the
// leeway ago), as kube-apiserver's service account validator does.
func validateTokenClaims(c *tokenClaims, now time.Time, objs ObjectGetter) (*serviceAccountInfo, error) {
	switch {
	case c.NotBefore != nil && now.Add(tokenLeeway).Before(c.NotBefore.time()):
		return nil, errors.New("service account token is not valid yet")
	case c.Expiry != nil && now.Add(-tokenLeeway).After(c.Expiry.time()):
		return nil, errors.New("service account token has expired")
	case c.IssuedAt != nil && now.Add(tokenLeeway).Before(c.IssuedAt.time()):
		return nil, errors.New("service account token is issued in the future")
	}
	k := c.Kubernetes
	if k == nil || k.Namespace == "" || k.ServiceAccount.Name == "" {
		return nil, errors.New("service account token has no service account claims")
	}
	// Objects deleted more than the leeway ago no longer validate tokens.
	deletedLongAgo := func(d *metav1.Time) bool { return d != nil && d.Time.Before(now.Add(-tokenLeeway)) }
	sa, err := objs.ServiceAccount(k.Namespace, k.ServiceAccount.Name)
	if err != nil {
		return nil, err
	}
	if string(sa.UID) != k.ServiceAccount.UID {
		return nil, fmt.Errorf("service account UID (%s) does not match claim (%s)", sa.UID, k.ServiceAccount.UID)
	}
	if deletedLongAgo(sa.DeletionTimestamp) {
		return nil, fmt.Errorf("service account %s/%s has been deleted", k.Namespace, k.ServiceAccount.Name)
	}
	info := &serviceAccountInfo{Namespace: k.Namespace, Name: k.ServiceAccount.Name, UID: k.ServiceAccount.UID}
	if c.ID != "" {
		info.CredentialID = "JTI=" + c.ID
	}
	if ref := k.Secret; ref != nil {
		s, err := objs.Secret(k.Namespace, ref.Name)
		if err != nil {
			return nil, errTokenInvalidated
		}
		if string(s.UID) != ref.UID {
			return nil, fmt.Errorf("secret UID (%s) does not match service account secret ref claim (%s)", s.UID, ref.UID)
		}
		if deletedLongAgo(s.DeletionTimestamp) {
			return nil, errTokenInvalidated
		}
	}
	if ref := k.Pod; ref != nil {
		p, err := objs.Pod(k.Namespace, ref.Name)
		if err != nil {
			return nil, errTokenInvalidated
		}
		if string(p.UID) != ref.UID {
			return nil, fmt.Errorf("pod UID (%s) does not match service account pod ref claim (%s)", p.UID, ref.UID)
		}
		if deletedLongAgo(p.DeletionTimestamp) {
			return nil, errTokenInvalidated
		}
		info.PodName, info.PodUID = ref.Name, ref.UID
		if n := k.Node; n != nil {
			info.NodeName, info.NodeUID = n.Name, n.UID
		}
	} else if ref := k.Node; ref != nil {
		n, err := objs.Node(ref.Name)
		if err != nil {
			return nil, errTokenInvalidated
		}
		if string(n.UID) != ref.UID {
			return nil, fmt.Errorf("node UID (%s) does not match service account node ref claim (%s)", n.UID, ref.UID)
		}
		if deletedLongAgo(n.DeletionTimestamp) {
			return nil, errTokenInvalidated
		}
		info.NodeName, info.NodeUID = ref.Name, ref.UID
	}
	return info, nil
}

// user returns the identity of a service account token, as kube-apiserver's
// ServiceAccountInfo.UserInfo plus the group every authenticated user has.
func (i *serviceAccountInfo) user() *request.User {
	u := &request.User{Name: serviceaccountinfo.MakeUsername(i.Namespace, i.Name), UID: i.UID,
		Groups: append(serviceaccountinfo.MakeGroupNames(i.Namespace), GroupAuthenticated)}
	extra := map[string][]string{}
	if i.PodName != "" && i.PodUID != "" {
		extra[serviceaccountinfo.PodNameKey] = []string{i.PodName}
		extra[serviceaccountinfo.PodUIDKey] = []string{i.PodUID}
	}
	if i.CredentialID != "" {
		extra[CredentialIDKey] = []string{i.CredentialID}
	}
	if i.NodeName != "" {
		extra[serviceaccountinfo.NodeNameKey] = []string{i.NodeName}
		if i.NodeUID != "" {
			extra[serviceaccountinfo.NodeUIDKey] = []string{i.NodeUID}
		}
	}
	if len(extra) > 0 {
		u.Extra = extra
	}
	return u
}

package request

import (
	"net/http/httptest"
	"testing"
)

func TestParseRecordsWhatAuthorizationSees(t *testing.T) {
	for _, tc := range []struct {
		method, url                  string
		verb, name, object, fieldSel string
	}{
		{"GET", "/api/v1/namespaces/ns/pods/p", "get", "p", "p", ""},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dp", "list", "", "p", "metadata.name=p"},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true&fieldSelector=metadata.name%3Dp,spec.nodeName%3Dn", "watch", "", "p",
			"metadata.name=p,spec.nodeName=n"},
		{"GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn", "list", "", "", "spec.nodeName=n"},
		{"GET", "/api/v1/pods?fieldSelector=metadata.name%3D..", "list", "", "", "metadata.name=.."},
		{"GET", "/api/v1/pods?fieldSelector=metadata.name%3Da%2Fb", "list", "", "", "metadata.name=a/b"},
		// The deprecated /watch/ prefix: upstream's authorizers see neither selectors nor a selected name.
		{"GET", "/api/v1/watch/pods?fieldSelector=spec.nodeName%3Dn", "watch", "", "", ""},
		{"GET", "/api/v1/watch/nodes?fieldSelector=metadata.name%3Dn", "watch", "", "", ""},
		{"GET", "/api/v1/watch/namespaces/ns/pods/p?fieldSelector=metadata.name%3Dq", "watch", "p", "p", ""},
		{"DELETE", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dp", "deletecollection", "", "", "metadata.name=p"},
		{"PATCH", "/api/v1/nodes/n?fieldSelector=metadata.name%3Dm", "patch", "n", "n", ""},
	} {
		info := Parse(httptest.NewRequest(tc.method, tc.url, nil))
		if info.Verb != tc.verb || info.Name != tc.name || info.ObjectName != tc.object || info.FieldSelector != tc.fieldSel {
			t.Errorf("%s %s: verb %q name %q object %q fieldSelector %q; want %q %q %q %q", tc.method, tc.url,
				info.Verb, info.Name, info.ObjectName, info.FieldSelector, tc.verb, tc.name, tc.object, tc.fieldSel)
		}
	}
}

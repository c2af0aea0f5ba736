package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strings"
	"time"
)

// A request client-go logged at -v=6: `"Response" verb="GET" url="https://..." status="200 OK"`.
var nrResponseLine = regexp.MustCompile(`"Response" verb="([A-Z]+)" url="([^"]+)"`)

// nrCountLog counts the requests logged between two offsets of the kubelet's log, by verb and resource.
func nrCountLog(path string, from, to int64) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(io.NewSectionReader(f, from, to-from))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := nrResponseLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		verb := strings.ToLower(m[1])
		if strings.Contains(m[2], "watch=true") {
			verb = "watch"
		}
		counts[verb+"_"+nrResource(m[2])]++
	}
	return counts, sc.Err()
}

// nrResource names the resource (and subresource) of an API URL: pods, pods_status, leases, ...; "other"
// for a path outside /api and /apis.
func nrResource(url string) string {
	path, _, _ := strings.Cut(url, "?")
	if _, rest, ok := strings.Cut(path, "://"); ok {
		_, path, _ = strings.Cut(rest, "/")
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) > 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) > 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "other"
	}
	if len(parts) > 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) > 2 {
		return parts[0] + "_" + parts[2]
	}
	return parts[0]
}

// nrCountAudit counts the audit events of user received in [from, to), by verb and resource.
func nrCountAudit(path string, offset int64, user string, from, to time.Time) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Verb string `json:"verb"`
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			Received time.Time `json:"requestReceivedTimestamp"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.User.Username != user ||
			ev.Received.Before(from) || !ev.Received.Before(to) {
			continue
		}
		key := ev.Verb + "_" + ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			key += "_" + ev.ObjectRef.Subresource
		}
		counts[key]++
	}
	return counts, sc.Err()
}

package pluginwatcher

import (
	"sort"
	"time"
)

// socket is a registration socket found in the directory: its path and its modification time, which a
// plugin that restarts and makes its socket anew changes.
type socket struct {
	path string
	mod  time.Time
}

// actions is what one pass over the directory does.
type actions struct {
	register   []string // sockets to register (new, or made anew since their registration)
	deregister []string // registered sockets that are gone or were made anew
}

// plan compares the sockets found with the sockets registered (by path, with the modification time each
// had when it registered) and the sockets whose registration is under way, which are left alone.
func plan(found []socket, registered map[string]time.Time, busy map[string]bool) actions {
	var a actions
	seen := make(map[string]bool, len(found))
	for _, s := range found {
		seen[s.path] = true
		if busy[s.path] {
			continue
		}
		at, ok := registered[s.path]
		switch {
		case !ok:
			a.register = append(a.register, s.path)
		case !at.Equal(s.mod):
			a.deregister = append(a.deregister, s.path)
			a.register = append(a.register, s.path)
		}
	}
	for p := range registered {
		if !seen[p] && !busy[p] {
			a.deregister = append(a.deregister, p)
		}
	}
	sort.Strings(a.register)
	sort.Strings(a.deregister)
	return a
}

package devicemanager

import (
	"fmt"
	"sort"
)

// plan decides where a container's need devices of resource come from. Devices it already holds come first
// (a restarted kubelet, a re-admitted pod), then devices the pod's finished init containers held (which
// upstream lets its later containers reuse): those are kept. The rest come from free, the healthy devices
// no other container holds, in ID order. It returns upstream's error when too few are available.
func plan(resource string, need int, held, reusable []string, healthy, inUse map[string]bool) (kept, free []string, err error) {
	taken := map[string]bool{}
	for _, id := range append(sorted(held), sorted(reusable)...) {
		if len(kept) < need && !taken[id] && (healthy[id] || contains(held, id)) {
			kept = append(kept, id)
			taken[id] = true
		}
	}
	for id, ok := range healthy {
		if ok && !inUse[id] && !taken[id] {
			free = append(free, id)
		}
	}
	if len(kept)+len(free) < need {
		return nil, nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d",
			resource, need, len(kept)+len(free))
	}
	return kept, sorted(free), nil
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// preferredFirst orders candidates as the plugin preferred them: its picks (those among the candidates)
// first, then the others in their order.
func preferredFirst(candidates, preferred []string) []string {
	in := map[string]bool{}
	for _, id := range candidates {
		in[id] = true
	}
	var out []string
	for _, id := range preferred {
		if in[id] {
			out = append(out, id)
			delete(in, id)
		}
	}
	for _, id := range candidates {
		if in[id] {
			out = append(out, id)
		}
	}
	return out
}

func sorted(ids []string) []string {
	out := append([]string(nil), ids...)
	sort.Strings(out)
	return out
}

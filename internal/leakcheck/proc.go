package leakcheck

import (
	"os"
	"strings"
)

// openFDs returns this process's descriptors and their link targets.
func openFDs() map[string]string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	fds := make(map[string]string, len(ents))
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the descriptor ReadDir itself used, closed by now
		}
		fds[e.Name()] = l
	}
	return fds
}

// sharedMaps returns the process's shared writable mappings, keyed by their maps line:
// rings, UAR pages and test buffers are MAP_SHARED, and the Go runtime makes none.
func sharedMaps() map[string]bool {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil
	}
	m := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, " rw-s ") {
			m[l] = true
		}
	}
	return m
}

package leakcheck

import (
	"runtime"
	"strconv"
	"strings"
)

// goroutines returns the stacks of all goroutines by id, and the id of the caller.
func goroutines() (map[int64]string, int64) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	all := map[int64]string{}
	var self int64 = -1
	for i, g := range strings.Split(string(buf), "\n\n") {
		id := goroutineID(g)
		if id < 0 {
			continue
		}
		if i == 0 { // runtime.Stack lists the calling goroutine first
			self = id
		}
		all[id] = g
	}
	return all, self
}

// goroutineID parses "goroutine 17 [running]:".
func goroutineID(stack string) int64 {
	s, ok := strings.CutPrefix(stack, "goroutine ")
	if !ok {
		return -1
	}
	i := strings.IndexByte(s, ' ')
	if i < 0 {
		return -1
	}
	id, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return -1
	}
	return id
}

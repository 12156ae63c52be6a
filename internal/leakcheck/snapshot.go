package leakcheck

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Snapshot is the state of the process before the tests, to compare against after them.
type Snapshot struct {
	cfg        config
	goroutines map[int64]string
	fds        map[string]string
	maps       map[string]bool
	counts     []int64
}

// Take records the current goroutines, descriptors, shared mappings and counters.
func Take(opts ...Option) *Snapshot {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	// Start the runtime's lazily created descriptors (the netpoller's epoll and eventfd)
	// so the baseline holds them and only descriptors the tests open count.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	s := &Snapshot{cfg: cfg}
	s.goroutines, _ = goroutines()
	s.fds = openFDs()
	s.maps = sharedMaps()
	for _, c := range cfg.counters {
		s.counts = append(s.counts, c.fn())
	}
	return s
}

// Leaks compares the process now with the snapshot once, returning nil or an *Error.
func (s *Snapshot) Leaks() error {
	e := &Error{}
	if s.cfg.goroutines {
		now, self := goroutines()
		ids := make([]int64, 0, len(now))
		for id := range now {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			g := now[id]
			if _, old := s.goroutines[id]; old || id == self || !strings.Contains(g, s.cfg.goMatch) {
				continue
			}
			e.Goroutines = append(e.Goroutines, g)
		}
	}
	if s.cfg.fds {
		now := openFDs()
		var fds []int
		for fd, target := range now {
			if old, ok := s.fds[fd]; ok && old == target {
				continue
			}
			if s.cfg.fdMatch != nil && !s.cfg.fdMatch(target) {
				continue
			}
			n, _ := strconv.Atoi(fd)
			fds = append(fds, n)
		}
		sort.Ints(fds)
		for _, n := range fds {
			e.FDs = append(e.FDs, fmt.Sprintf("fd %d -> %s", n, now[strconv.Itoa(n)]))
		}
	}
	if s.cfg.maps {
		for l := range sharedMaps() {
			if !s.maps[l] {
				e.Maps = append(e.Maps, l)
			}
		}
		sort.Strings(e.Maps)
	}
	for i, c := range s.cfg.counters {
		if n := c.fn(); n != s.counts[i] {
			e.Other = append(e.Other, fmt.Sprintf("%s: %d, %d before the tests", c.name, n, s.counts[i]))
		}
	}
	for _, c := range s.cfg.checks {
		if err := c.fn(); err != nil {
			e.Other = append(e.Other, fmt.Sprintf("%s: %v", c.name, err))
		}
	}
	if len(e.Goroutines)+len(e.FDs)+len(e.Maps)+len(e.Other) == 0 {
		return nil
	}
	return e
}

// Wait polls Leaks until nothing is left or the settle time (DefaultSettle unless an
// option set it) has passed, and returns the last result.
func (s *Snapshot) Wait() error {
	deadline := time.Now().Add(s.cfg.settle)
	for {
		err := s.Leaks()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

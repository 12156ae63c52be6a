package leakcheck

import (
	"fmt"
	"strings"
	"time"
)

// Module is the import path prefix whose goroutines the goroutine check counts.
const Module = "github.com/shift-rdma/shift/"

// DefaultSettle bounds the wait for asynchronous teardown after the tests. It is a
// failure guard only: a clean run returns as soon as everything has settled.
const DefaultSettle = 10 * time.Second

// config is what a Snapshot checks; the zero value plus defaults() checks everything.
type config struct {
	goroutines bool
	goMatch    string
	fds        bool
	fdMatch    func(target string) bool
	maps       bool
	settle     time.Duration
	checks     []check
	counters   []counter
}

type check struct {
	name string
	fn   func() error
}

type counter struct {
	name string
	fn   func() int64
}

// Option selects what a Snapshot checks.
type Option func(*config)

func defaults() config {
	return config{goroutines: true, goMatch: Module, fds: true, maps: true, settle: DefaultSettle}
}

// NoGoroutines turns the goroutine check off.
func NoGoroutines() Option { return func(c *config) { c.goroutines = false } }

// NoFDs turns the file descriptor check off.
func NoFDs() Option { return func(c *config) { c.fds = false } }

// NoMaps turns the shared mapping check off.
func NoMaps() Option { return func(c *config) { c.maps = false } }

// GoroutinesMatching narrows the goroutine check to goroutines whose stack (frames or
// creator) contains s, a package path such as Module+"mlx5/emu/fabric.". The default is
// Module.
func GoroutinesMatching(s string) Option { return func(c *config) { c.goMatch = s } }

// FDsWithTarget narrows the descriptor check to descriptors whose /proc/self/fd link
// target starts with prefix, such as "socket:".
func FDsWithTarget(prefix string) Option {
	return func(c *config) {
		c.fdMatch = func(target string) bool { return strings.HasPrefix(target, prefix) }
	}
}

// Settle sets how long to wait for leftovers to go away before reporting them.
func Settle(d time.Duration) Option { return func(c *config) { c.settle = d } }

// Check adds a package-specific check: fn returns an error describing what is left
// (namespaces, child processes) or nil once nothing is. It is retried until the settle
// deadline like the built-in checks.
func Check(name string, fn func() error) Option {
	return func(c *config) { c.checks = append(c.checks, check{name, fn}) }
}

// Counter adds a count that must come back to its value before the tests, such as a
// package's live buffer count.
func Counter(name string, fn func() int64) Option {
	return func(c *config) { c.counters = append(c.counters, counter{name, fn}) }
}

// Error lists what a run left behind.
type Error struct {
	Goroutines []string // stacks of leaked goroutines
	FDs        []string // "fd N -> target" of leaked descriptors
	Maps       []string // /proc/self/maps lines of leaked shared mappings
	Other      []string // failed Checks and Counters, "name: detail"
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "leak: %d goroutines, %d file descriptors, %d shared mappings, %d other",
		len(e.Goroutines), len(e.FDs), len(e.Maps), len(e.Other))
	for _, s := range e.Other {
		fmt.Fprintf(&b, "\n  %s", s)
	}
	for _, s := range e.FDs {
		fmt.Fprintf(&b, "\n  %s", s)
	}
	for _, s := range e.Maps {
		fmt.Fprintf(&b, "\n  mapping %s", s)
	}
	for _, s := range e.Goroutines {
		fmt.Fprintf(&b, "\n\n%s", s)
	}
	return b.String()
}

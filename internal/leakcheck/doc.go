// Package leakcheck is the test-binary leak check every package's TestMain shares: it
// snapshots this module's goroutines, the process's open file descriptors and its shared
// mappings before the tests, runs them, waits a bounded time for asynchronous teardown
// (emulated NICs, timer callbacks, child processes) to finish, and fails a passing run
// that left any of them behind, naming each leftover.
//
// Goroutines are compared by id, not by count, so one goroutine exiting cannot hide
// another one leaking; only goroutines running or started by this module's code count,
// since the runtime, testing and fuzzing machinery start and keep their own. Descriptors
// and mappings are compared as sets read from /proc/self/fd and /proc/self/maps.
// Packages add their own resources (namespaces, child processes, live buffers) with
// [Check] and [Counter].
package leakcheck

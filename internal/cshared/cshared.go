// Package cshared holds what the project's c-shared libraries (the libmlx5-shift plugin, the
// emulated kernel library) do alike as guests of a C program's process.
package cshared

import (
	"os"
	"runtime"
	"strconv"
)

// LimitProcs caps the threads running Go at once at SHIFT_GOMAXPROCS (default 2) unless
// GOMAXPROCS is set: the application's threads run the verbs; the library's Go needs few
// threads of its own (the emulated NIC's engine, SHIFT's background work).
func LimitProcs() {
	n := 2
	if v, err := strconv.Atoi(os.Getenv("SHIFT_GOMAXPROCS")); err == nil && v > 0 {
		n = v
	}
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(min(n, runtime.NumCPU()))
	}
}

//go:build !race

package provider

import "sync/atomic"

// See race_on.go.

func raceRelease(*atomic.Uint32) {}

func raceAcquire(*atomic.Uint32) {}

// Package clock is the time source of the emulated ConnectX (and, through Options, of the
// layers above it). Real time by default, so the RC timeouts an application configures mean
// what they say; tests and the deterministic simulation substitute a manual clock to drive
// retransmission and delays deterministically.
package clock

import "time"

// Clock is the emulator's view of time.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed on this clock.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it did so.
	Stop() bool
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

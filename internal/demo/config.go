package demo

import (
	"fmt"
	"time"
)

// Mode selects the stack a run uses.
type Mode string

// Modes.
const (
	ModeProvider Mode = "provider" // plain provider: the baseline, the failure kills the traffic
	ModeShift    Mode = "shift"    // package failover: traffic moves to the backup NIC
	// ModeShiftWatch is ModeShift with the default NIC's link events read (the link watcher's
	// part): the failure is found at the link's down rather than by the RC retry timeout.
	ModeShiftWatch Mode = "shift-watch"
)

// shifts reports whether the mode runs SHIFT.
func (m Mode) shifts() bool { return m == ModeShift || m == ModeShiftWatch }

// ParseModes reads "provider", "shift", "shift-watch", "both" (provider and shift) or "all".
func ParseModes(s string) ([]Mode, error) {
	switch s {
	case "provider":
		return []Mode{ModeProvider}, nil
	case "shift":
		return []Mode{ModeShift}, nil
	case "shift-watch":
		return []Mode{ModeShiftWatch}, nil
	case "both":
		return []Mode{ModeProvider, ModeShift}, nil
	case "all", "":
		return []Mode{ModeProvider, ModeShift, ModeShiftWatch}, nil
	}
	return nil, fmt.Errorf("demo: mode %q: want provider, shift, shift-watch, both or all", s)
}

// Config is one run's schedule and workload. Zero fields take the defaults of Defaults.
type Config struct {
	Duration  time.Duration // whole run (15 s)
	FailAt    time.Duration // default NIC's link of host 0 goes down (5 s); <0: never
	RecoverAt time.Duration // and comes back (10 s); <0: never
	Interval  time.Duration // sampling interval (100 ms)
	FailHost  int           // whose default NIC fails: 0, the senders' host, or 1, the receivers'

	WriteSlots int // WRITE stream: slots in flight (8)
	WriteChunk int // bytes per data WRITE (64 KiB)
	WriteParts int // data WRITEs per message before the WRITE_IMM flag (4)
	SendSlots  int // SEND stream: messages in flight and receives posted (16)
	SendSize   int // bytes per SEND (8 KiB)

	// Timeout is the RC local ACK timeout exponent (4.096 µs × 2^Timeout per try, 8 tries):
	// 14 as perftest, about 0.54 s to RETRY_EXC_ERR.
	Timeout uint8
	// Seed seeds the fabric (and through it the emulated NICs' random choices).
	Seed uint64
}

// Defaults fills zero fields.
func (c Config) Defaults() Config {
	setD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setI := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setD(&c.Duration, 15*time.Second)
	setD(&c.FailAt, 5*time.Second)
	setD(&c.RecoverAt, 10*time.Second)
	setD(&c.Interval, 100*time.Millisecond)
	setI(&c.WriteSlots, 8)
	setI(&c.WriteChunk, 64<<10)
	setI(&c.WriteParts, 4)
	setI(&c.SendSlots, 16)
	setI(&c.SendSize, 8<<10)
	if c.Timeout == 0 {
		c.Timeout = 14
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c
}

// Validate checks the schedule and sizes.
func (c Config) Validate() error {
	switch {
	case c.Duration <= 0 || c.Interval <= 0:
		return fmt.Errorf("demo: config: duration %v and interval %v must be positive", c.Duration, c.Interval)
	case c.Interval > c.Duration:
		return fmt.Errorf("demo: config: interval %v longer than the run %v", c.Interval, c.Duration)
	case c.FailAt >= 0 && c.RecoverAt >= 0 && c.RecoverAt <= c.FailAt:
		return fmt.Errorf("demo: config: recovery at %v is not after the failure at %v", c.RecoverAt, c.FailAt)
	case c.WriteSlots <= 0 || c.WriteChunk < 16 || c.WriteParts <= 0 || c.SendSlots <= 0 || c.SendSize < 16:
		return fmt.Errorf("demo: config: workload sizes out of range: %+v", c)
	case c.WriteChunk%8 != 0 || c.SendSize%8 != 0:
		return fmt.Errorf("demo: config: chunk %d and send size %d must be multiples of 8", c.WriteChunk, c.SendSize)
	case c.FailHost != 0 && c.FailHost != 1:
		return fmt.Errorf("demo: config: fail host %d: want 0 (senders) or 1 (receivers)", c.FailHost)
	case c.Timeout > 31:
		return fmt.Errorf("demo: config: timeout exponent %d > 31", c.Timeout)
	}
	return nil
}

// hasFailure reports whether the schedule injects a failure inside the run.
func (c Config) hasFailure() bool { return c.FailAt >= 0 && c.FailAt < c.Duration }

// hasRecovery reports whether the schedule restores the link inside the run.
func (c Config) hasRecovery() bool {
	return c.hasFailure() && c.RecoverAt >= 0 && c.RecoverAt < c.Duration
}

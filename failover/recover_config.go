package failover

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Recovery defaults (docs/FAILOVER.md "Recovery").
const (
	defaultProbeInterval    = 100 * time.Millisecond
	defaultProbeMaxInterval = 2 * time.Second
	defaultFenceAfter       = 10 * time.Millisecond
	defaultFenceAfterWRs    = 64
)

// recoveryDefaults fills the recovery options left zero with the defaults. The edges read
// the environment (the plugin: SHIFT_PROBE_INTERVAL with ParseProbeInterval,
// SHIFT_FENCE_AFTER with ParseFenceAfter); the library does not.
func recoveryDefaults(o *Options) error {
	if o.ProbeInterval < 0 || o.FenceAfter < 0 || o.FenceAfterWRs < 0 {
		return fmt.Errorf("failover: probe interval %v, fence after %d WRs or %v: %w: negative", o.ProbeInterval, o.FenceAfterWRs, o.FenceAfter, ErrBadConfig)
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = defaultProbeInterval
	}
	if o.ProbeMaxInterval == 0 {
		o.ProbeMaxInterval = max(defaultProbeMaxInterval, o.ProbeInterval)
	}
	if o.FenceAfter == 0 {
		o.FenceAfter = defaultFenceAfter
	}
	if o.FenceAfterWRs == 0 {
		o.FenceAfterWRs = defaultFenceAfterWRs
	}
	return nil
}

// ParseFenceAfter parses the SHIFT_FENCE_AFTER syntax "<n>,<duration>" (e.g. "64,10ms"): in
// WaitSignaled, SHIFT posts its own fence after n WRs without a signaled one or after the
// duration, whichever comes first.
func ParseFenceAfter(s string) (int, time.Duration, error) {
	a, b, ok := strings.Cut(s, ",")
	n, err1 := strconv.Atoi(strings.TrimSpace(a))
	d, err2 := time.ParseDuration(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || n < 1 || d <= 0 {
		return 0, 0, fmt.Errorf("failover: SHIFT_FENCE_AFTER %q: %w: want <n>,<duration>", s, ErrBadConfig)
	}
	return n, d, nil
}

// ParseProbeInterval parses SHIFT_PROBE_INTERVAL: a positive Go duration ("100ms").
func ParseProbeInterval(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("failover: SHIFT_PROBE_INTERVAL %q: %w: want a positive duration", s, ErrBadConfig)
	}
	return d, nil
}

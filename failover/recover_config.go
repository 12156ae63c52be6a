package failover

import (
	"fmt"
	"os"
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

// recoveryDefaults fills the recovery options from the environment (SHIFT_PROBE_INTERVAL,
// SHIFT_FENCE_AFTER) and the defaults.
func recoveryDefaults(o *Options) error {
	if o.ProbeInterval == 0 {
		o.ProbeInterval = defaultProbeInterval
		if s := os.Getenv("SHIFT_PROBE_INTERVAL"); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				return fmt.Errorf("failover: SHIFT_PROBE_INTERVAL %q: %w: want a positive duration", s, ErrBadConfig)
			}
			o.ProbeInterval = d
		}
	}
	if o.ProbeMaxInterval == 0 {
		o.ProbeMaxInterval = max(defaultProbeMaxInterval, o.ProbeInterval)
	}
	if o.FenceAfter == 0 && o.FenceAfterWRs == 0 {
		if s := os.Getenv("SHIFT_FENCE_AFTER"); s != "" {
			n, d, err := ParseFenceAfter(s)
			if err != nil {
				return err
			}
			o.FenceAfterWRs, o.FenceAfter = n, d
		}
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

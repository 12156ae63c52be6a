package demo

// NewShiftStack is the one constructor of the shift mode: Sides on each host's default NIC
// (devs[host][0]) with failover to its other NICs (devs[host][1:]) through package failover.
// Package failover does not yet provide a verbs surface, so this returns
// ErrFailoverUnavailable; the demo reports that instead of running something else.
func NewShiftStack(devs [][]string, cfg SideConfig) (Stack, error) {
	_, _ = devs, cfg
	return nil, ErrFailoverUnavailable
}

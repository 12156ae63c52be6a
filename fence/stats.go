package fence

import "sync/atomic"

// Stats counts what a Fence has done over its lifetime (across Reset).
type Stats struct {
	Begun         uint64 // fences begun
	Released      uint64 // fences that reached Done
	Failed        uint64 // fences that failed (fence WR, notification or ring error)
	Aborted       uint64 // fences the caller aborted
	Notifications uint64 // notification WRs rung
	WithheldWRs   uint64 // WRs written with the doorbell withheld
	ReleasedWRs   uint64 // withheld WRs whose doorbell was rung by a release
}

type counters struct {
	begun, released, failed, aborted, notifications atomic.Uint64
	withheldWRs, releasedWRs                        atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{Begun: c.begun.Load(), Released: c.released.Load(), Failed: c.failed.Load(),
		Aborted: c.aborted.Load(), Notifications: c.notifications.Load(),
		WithheldWRs: c.withheldWRs.Load(), ReleasedWRs: c.releasedWRs.Load()}
}

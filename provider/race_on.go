//go:build race

package provider

import "sync/atomic"

// The race detector does not see the happens-before edge the NIC makes between a post and
// the poll of its completion: it runs through the doorbell record, the device and the CQE,
// memory outside Go's heap, whose atomics the detector ignores. In race builds the poster
// publishes its per-WQE tables on a word of its own and the poller reads it before it looks
// them up, so the detector sees the order the device guarantees. Other builds do nothing.

func raceRelease(w *atomic.Uint32) { w.Add(1) }

func raceAcquire(w *atomic.Uint32) { w.Load() }

package demo

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// AppError is an error the application saw: a failed post, an error completion, or data
// that failed verification.
type AppError struct {
	At     time.Duration // since the start of the run
	Stream string
	Side   string // "sender" or "receiver"
	What   string
	Status verbs.WCStatus // for error completions; WCSuccess otherwise
}

func (e AppError) String() string {
	return fmt.Sprintf("%.2fs %s %s: %s", e.At.Seconds(), e.Stream, e.Side, e.What)
}

// streamStats are one stream's live counters, read by the sampler.
type streamStats struct {
	name  string
	start time.Time
	bytes atomic.Uint64 // verified payload bytes
	msgs  atomic.Uint64 // verified messages

	// The receiver's clock of verified messages (nanoseconds since start): the last one,
	// and the longest pause between two, ending at gapEnd. Written by the receiver only.
	lastAt, gap, gapEnd atomic.Int64

	mu   sync.Mutex
	errs []AppError
}

// verified counts one verified message of n bytes and tracks the longest pause.
func (s *streamStats) verified(n int) {
	s.bytes.Add(uint64(n))
	s.msgs.Add(1)
	now := int64(time.Since(s.start))
	if g := now - s.lastAt.Load(); g > s.gap.Load() {
		s.gap.Store(g)
		s.gapEnd.Store(now)
	}
	s.lastAt.Store(now)
}

func (s *streamStats) fail(side, what string, st verbs.WCStatus) {
	s.mu.Lock()
	s.errs = append(s.errs, AppError{At: time.Since(s.start), Stream: s.name, Side: side, What: what, Status: st})
	s.mu.Unlock()
}

func (s *streamStats) errors() []AppError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]AppError(nil), s.errs...)
}

// StreamResult is a stream's outcome.
type StreamResult struct {
	Name          string
	BytesVerified uint64
	MsgsVerified  uint64
	Errors        []AppError
	// LongestPause is the longest time between two verified messages (from the start for
	// the first), ending at PauseEnd: the stall the application saw. A stream that died
	// has its pause up to its last message only; see Errors.
	LongestPause, PauseEnd time.Duration
	// LastVerified is when the last message was verified.
	LastVerified time.Duration
}

func (s *streamStats) result() StreamResult {
	return StreamResult{Name: s.name, BytesVerified: s.bytes.Load(), MsgsVerified: s.msgs.Load(), Errors: s.errors(),
		LongestPause: time.Duration(s.gap.Load()), PauseEnd: time.Duration(s.gapEnd.Load()),
		LastVerified: time.Duration(s.lastAt.Load())}
}

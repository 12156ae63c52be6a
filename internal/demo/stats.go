package demo

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/provider"
)

// AppError is an error the application saw: a failed post, an error completion, or data
// that failed verification.
type AppError struct {
	At     time.Duration // since the start of the run
	Stream string
	Side   string // "sender" or "receiver"
	What   string
	Status provider.WCStatus // for error completions; WCSuccess otherwise
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

	mu   sync.Mutex
	errs []AppError
}

func (s *streamStats) fail(side, what string, st provider.WCStatus) {
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
}

func (s *streamStats) result() StreamResult {
	return StreamResult{Name: s.name, BytesVerified: s.bytes.Load(), MsgsVerified: s.msgs.Load(), Errors: s.errors()}
}

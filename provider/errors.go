package provider

import (
	"errors"
	"fmt"
)

// Sentinel errors of the data path. Errors returned by PostSend and PostRecv wrap one of these
// (test with errors.Is) inside a *WRError naming the work request and the limit it exceeded.
var (
	// ErrQPState: the QP is not in a state that accepts this post (a send needs RTS, a
	// receive anything but RESET).
	ErrQPState = errors.New("provider: QP state does not allow this post")
	// ErrSQFull: the send queue has no room for the whole WR list.
	ErrSQFull = errors.New("provider: send queue overflow")
	// ErrRQFull: the receive queue has no room for the whole WR list.
	ErrRQFull = errors.New("provider: receive queue overflow")
	// ErrTooManySGE: a WR carries more scatter/gather entries than the QP was created with.
	ErrTooManySGE = errors.New("provider: too many scatter/gather entries")
	// ErrInlineTooLarge: the inline payload exceeds the QP's max inline data.
	ErrInlineTooLarge = errors.New("provider: inline data too large")
	// ErrBadOpcode: the WR opcode is not one this provider posts on an RC QP.
	ErrBadOpcode = errors.New("provider: unsupported work request opcode")
	// ErrBadAtomic: an atomic WR whose local buffer is not exactly one 8-byte SGE.
	ErrBadAtomic = errors.New("provider: atomic needs one 8-byte SGE")
	// ErrInvalidArgument: an argument outside what the verbs API allows.
	ErrInvalidArgument = errors.New("provider: invalid argument")
	// ErrClosed: the object was destroyed.
	ErrClosed = errors.New("provider: object destroyed")
	// ErrNotFound: no device, port or GID matches the request.
	ErrNotFound = errors.New("provider: not found")
	// ErrTimeout: a wait ended before an event arrived.
	ErrTimeout = errors.New("provider: timed out")
	// ErrCQOverrun: the CQ holds an entry that does not belong to any QP of this context.
	ErrCQOverrun = errors.New("provider: completion for an unknown QP")
)

// WRError says which work request of a list was rejected and why. Nothing of the list was
// posted when a WRError is returned.
type WRError struct {
	Op    string // "post_send" or "post_recv"
	Index int    // index of the rejected WR in the caller's slice
	Limit int    // the limit that was exceeded (queue room, max SGEs, max inline), if any
	Got   int    // what the WR asked for
	Err   error  // sentinel
}

func (e *WRError) Error() string {
	if e.Limit != 0 || e.Got != 0 {
		return fmt.Sprintf("%s: wr[%d]: %v (limit %d, got %d)", e.Op, e.Index, e.Err, e.Limit, e.Got)
	}
	return fmt.Sprintf("%s: wr[%d]: %v", e.Op, e.Index, e.Err)
}

// Unwrap returns the sentinel.
func (e *WRError) Unwrap() error { return e.Err }

// opError names a control-path operation and wraps the underlying error (often a uverbs
// error carrying the errno).
func opError(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("provider: %s: %w", op, err)
}

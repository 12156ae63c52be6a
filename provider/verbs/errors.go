package verbs

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Sentinel errors. Errors of every implementation wrap one of these where one applies (test
// with errors.Is); errors from the kernel wrap the unix.Errno it returned. Errno maps either
// to the errno a C provider would return.
var (
	// ErrQPState: the QP is not in a state that accepts this post (a send needs RTS, a
	// receive anything but RESET).
	ErrQPState = errors.New("QP state does not allow this post")
	// ErrSQFull: the send queue has no room for the whole WR list.
	ErrSQFull = errors.New("send queue overflow")
	// ErrRQFull: the receive queue has no room for the whole WR list.
	ErrRQFull = errors.New("receive queue overflow")
	// ErrTooManySGE: a WR carries more scatter/gather entries than the QP was created with.
	ErrTooManySGE = errors.New("too many scatter/gather entries")
	// ErrInlineTooLarge: the inline payload exceeds the QP's max inline data.
	ErrInlineTooLarge = errors.New("inline data too large")
	// ErrBadOpcode: the WR opcode is not one the provider posts on an RC QP.
	ErrBadOpcode = errors.New("unsupported work request opcode")
	// ErrBadAtomic: an atomic WR whose local buffer is not exactly one 8-byte SGE.
	ErrBadAtomic = errors.New("atomic needs one 8-byte SGE")
	// ErrInvalidArgument: an argument outside what the verbs API allows.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotSupported: a verb or a variant of one this implementation does not provide.
	ErrNotSupported = errors.New("operation not supported")
	// ErrClosed: the object was destroyed.
	ErrClosed = errors.New("object destroyed")
	// ErrNotFound: no device, port or GID matches the request.
	ErrNotFound = errors.New("not found")
	// ErrTimeout: a wait ended before an event arrived.
	ErrTimeout = errors.New("timed out")
	// ErrCQOverrun: the CQ holds an entry that does not belong to any QP of this context.
	ErrCQOverrun = errors.New("completion for an unknown QP")
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

// Errno is the errno a C verbs provider returns for err: the unix.Errno it wraps if any
// (kernel errors), else the one libmlx5 uses for the sentinel (ENOMEM for a full queue or an
// oversized inline payload, EINVAL for a bad WR or state, ...), else EIO. nil gives 0.
func Errno(err error) unix.Errno {
	if err == nil {
		return 0
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, ErrSQFull), errors.Is(err, ErrRQFull), errors.Is(err, ErrInlineTooLarge):
		return unix.ENOMEM
	case errors.Is(err, ErrQPState), errors.Is(err, ErrTooManySGE), errors.Is(err, ErrBadOpcode),
		errors.Is(err, ErrBadAtomic), errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrCQOverrun):
		return unix.EINVAL
	case errors.Is(err, ErrNotSupported):
		return unix.EOPNOTSUPP
	case errors.Is(err, ErrClosed):
		return unix.EBADF
	case errors.Is(err, ErrNotFound):
		return unix.ENOENT
	case errors.Is(err, ErrTimeout):
		return unix.ETIMEDOUT
	}
	return unix.EIO
}

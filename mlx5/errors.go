package mlx5

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Sentinel errors. Every error returned by this package wraps one of them and, where the
// kernel would answer the same input with an errno, that errno too, so callers can test with
// errors.Is for either.
var (
	// ErrShort reports a buffer too short for the structure being decoded or written.
	ErrShort = errors.New("mlx5: buffer too short")
	// ErrMalformed reports bytes that do not form a valid structure (bad DS, bad opcode, a
	// segment that runs past its work queue).
	ErrMalformed = errors.New("mlx5: malformed")
	// ErrGeometry reports a ring size, stride or alignment the hardware cannot use.
	ErrGeometry = errors.New("mlx5: invalid queue geometry")
	// ErrFull reports a work queue or completion queue without room for the request.
	ErrFull = errors.New("mlx5: queue full")
	// ErrInlineTooLarge reports inline data beyond the QP's max_inline_data.
	ErrInlineTooLarge = errors.New("mlx5: inline data too large")
)

// opError wraps a sentinel and an errno under the name of the operation that failed.
type opError struct {
	op    string
	kind  error
	errno unix.Errno
	msg   string
}

func (e *opError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("%s: %v (%v)", e.op, e.kind, e.errno)
	}
	return fmt.Sprintf("%s: %v: %s (%v)", e.op, e.kind, e.msg, e.errno)
}

// Unwrap exposes both the sentinel and the errno to errors.Is.
func (e *opError) Unwrap() []error { return []error{e.kind, e.errno} }

// NewOpError returns an error "op: kind: detail (errno)" that wraps both kind and errno,
// so errors.Is matches either. It is this package's error shape, shared with the layers
// above that report errors the same way (the emulated device), so there is one of it.
func NewOpError(op string, kind error, errno unix.Errno, format string, args ...any) error {
	return &opError{op: op, kind: kind, errno: errno, msg: fmt.Sprintf(format, args...)}
}

func newErr(op string, kind error, errno unix.Errno, format string, args ...any) error {
	return NewOpError(op, kind, errno, format, args...)
}

func shortErr(op string, have, need int) error {
	return newErr(op, ErrShort, unix.EINVAL, "have %d bytes, need %d", have, need)
}

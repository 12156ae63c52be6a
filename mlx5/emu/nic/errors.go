package nic

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Sentinel errors. Every error the device returns wraps one of them and the errno the kernel
// would report for the same request, so the emulated kernel can hand the errno to user space
// and tests can use errors.Is for either.
var (
	// ErrClosed: the device (or the object) has been closed.
	ErrClosed = errors.New("nic: closed")
	// ErrInvalid: an argument is out of range, misaligned or inconsistent.
	ErrInvalid = errors.New("nic: invalid argument")
	// ErrNotFound: no object with that number or key exists.
	ErrNotFound = errors.New("nic: no such object")
	// ErrBusy: the object is still in use (a bfreg already driving another QP, a CQ with QPs).
	ErrBusy = errors.New("nic: resource busy")
	// ErrNoSpace: the device has no free number (QPN, CQN, key) left.
	ErrNoSpace = errors.New("nic: out of resources")
)

// opError names the operation and wraps a sentinel together with an errno.
type opError struct {
	op    string
	kind  error
	errno unix.Errno
	msg   string
}

func (e *opError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("nic: %s: %v (%v)", e.op, e.kind, e.errno)
	}
	return fmt.Sprintf("nic: %s: %v: %s (%v)", e.op, e.kind, e.msg, e.errno)
}

// Unwrap exposes both the sentinel and the errno to errors.Is.
func (e *opError) Unwrap() []error { return []error{e.kind, e.errno} }

func newErr(op string, kind error, errno unix.Errno, format string, args ...any) error {
	return &opError{op: op, kind: kind, errno: errno, msg: fmt.Sprintf(format, args...)}
}

// errnoOf returns the errno inside err, or def when there is none.
func errnoOf(err error, def unix.Errno) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return def
}

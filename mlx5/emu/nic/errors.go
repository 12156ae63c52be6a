package nic

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
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
	// ErrDead: the device died (Device.Kill); commands fail with EIO.
	ErrDead = errors.New("nic: device in fatal error")
)

// newErr names the operation (prefixed with the package) and wraps a sentinel together
// with an errno, in mlx5's error shape.
func newErr(op string, kind error, errno unix.Errno, format string, args ...any) error {
	return mlx5.NewOpError("nic: "+op, kind, errno, format, args...)
}

// errnoOf returns the errno inside err, or def when there is none.
func errnoOf(err error, def unix.Errno) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return def
}

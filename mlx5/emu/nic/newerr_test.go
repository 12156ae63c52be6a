package nic

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// The device's errors read "nic: op: sentinel: detail (errno)" and match both the sentinel
// and the errno.
func TestNewErrShape(t *testing.T) {
	err := newErr("destroy_cq", ErrBusy, unix.EBUSY, "%d QPs attached", 2)
	if want := "nic: destroy_cq: nic: resource busy: 2 QPs attached (device or resource busy)"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if !errors.Is(err, ErrBusy) || !errors.Is(err, unix.EBUSY) || errnoOf(err, unix.EINVAL) != unix.EBUSY {
		t.Errorf("sentinel or errno lost in %v", err)
	}
}

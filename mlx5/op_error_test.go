package mlx5

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// NewOpError names the operation, keeps the detail, and lets errors.Is find both the
// sentinel and the errno.
func TestNewOpError(t *testing.T) {
	err := NewOpError("create_qp", ErrGeometry, unix.EINVAL, "%d WQEs", 3)
	if want := "create_qp: mlx5: invalid queue geometry: 3 WQEs (invalid argument)"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if !errors.Is(err, ErrGeometry) || !errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOMEM) {
		t.Errorf("errors.Is does not see exactly the sentinel and the errno in %v", err)
	}
	if got, want := NewOpError("poll", ErrFull, unix.EAGAIN, "").Error(), "poll: mlx5: queue full (resource temporarily unavailable)"; got != want {
		t.Errorf("without detail: %q, want %q", got, want)
	}
}

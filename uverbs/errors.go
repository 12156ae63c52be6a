package uverbs

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Sentinel errors for conditions this package detects itself (as opposed to errnos the kernel
// returns, which are wrapped in *CmdError).
var (
	// ErrNoDevice means no uverbs device matched (discovery or open by name).
	ErrNoDevice = errors.New("no such RDMA device")
	// ErrABIVersion means a device or the uverbs class reports an ABI version this package does
	// not speak.
	ErrABIVersion = errors.New("uverbs: unsupported ABI version")
	// ErrMalformed means a buffer handed to a decoder is shorter or otherwise inconsistent with
	// the ABI framing it claims.
	ErrMalformed = errors.New("uverbs: malformed ABI buffer")
	// ErrAttrMissing means an ioctl attribute the caller asked for is not in the request.
	ErrAttrMissing = errors.New("uverbs: attribute not present")
)

// CmdError is the failure of one uverbs command: Op names the command as the kernel knows it
// (for example "ioctl QP_CREATE" or "write MODIFY_QP") and Errno is what the kernel (or the
// emulated kernel) returned. errors.Is(err, unix.EINVAL) works through it.
type CmdError struct {
	Op    string
	Errno unix.Errno
}

// Error names the command, the errno and its symbolic name.
func (e *CmdError) Error() string {
	return fmt.Sprintf("uverbs: %s: %s (%s)", e.Op, e.Errno.Error(), unix.ErrnoName(e.Errno))
}

// Unwrap returns the errno.
func (e *CmdError) Unwrap() error { return e.Errno }

// cmdErr wraps err as a *CmdError when it is an errno; other errors get the op as context.
func cmdErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		return &CmdError{Op: op, Errno: errno}
	}
	return fmt.Errorf("uverbs: %s: %w", op, err)
}

const errEINVAL = unix.EINVAL

const errEOPNOTSUPP = unix.EOPNOTSUPP

package uverbs

import (
	"errors"

	"golang.org/x/sys/unix"
)

// fakeKernel is a File whose kernel side is written by each test with the server-side decoders
// of this package, so every client call is checked against the same bytes an emulated kernel
// would decode.
type fakeKernel struct {
	ioctl func(r *IoctlRequest) error
	write func(w *WriteRequest) error
	raw   [][]byte // every buffer received, copied
}

func (k *fakeKernel) Ioctl(buf []byte) error {
	k.raw = append(k.raw, append([]byte(nil), buf...))
	r, err := ParseIoctl(buf)
	if err != nil {
		return err
	}
	if k.ioctl == nil {
		return unix.ENOTTY
	}
	return k.ioctl(r)
}

func (k *fakeKernel) Write(cmd []byte) error {
	k.raw = append(k.raw, append([]byte(nil), cmd...))
	w, err := ParseWrite(cmd)
	if err != nil {
		return err
	}
	if k.write == nil {
		return unix.EOPNOTSUPP
	}
	return k.write(w)
}

func (k *fakeKernel) Mmap(int64, int) ([]byte, error) { return nil, unix.ENODEV }
func (k *fakeKernel) Munmap([]byte) error             { return unix.EINVAL }
func (k *fakeKernel) Fd() int                         { return -1 }
func (k *fakeKernel) Close() error                    { return nil }

func errorsIs(err, target error) bool { return errors.Is(err, target) }

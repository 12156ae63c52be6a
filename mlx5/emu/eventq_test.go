package emu

import (
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestEventQueueOneEventPerRead(t *testing.T) {
	q, err := newEventQueue("test")
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(q.userFd)
	defer q.close()
	q.pushAsync(0xabc, 9)
	q.pushComp(0x1234)
	buf := make([]byte, 64)
	// Bounded wait only as a failure guard.
	pfd := []unix.PollFd{{Fd: int32(q.userFd), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, int(10*time.Second/time.Millisecond)); err != nil || n != 1 {
		t.Fatalf("poll: %d %v", n, err)
	}
	n, err := unix.Read(q.userFd, buf)
	if err != nil || n != 16 {
		t.Fatalf("read async: %d %v", n, err)
	}
	if e, typ := binary.NativeEndian.Uint64(buf), binary.NativeEndian.Uint32(buf[8:]); e != 0xabc || typ != 9 {
		t.Errorf("async event %#x type %d", e, typ)
	}
	n, err = unix.Read(q.userFd, buf)
	if err != nil || n != 8 || binary.NativeEndian.Uint64(buf) != 0x1234 {
		t.Fatalf("read comp: %d %v %x", n, err, buf[:8])
	}
	if err := unix.SetNonblock(q.userFd, true); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Read(q.userFd, buf); err != unix.EAGAIN {
		t.Errorf("empty queue read: %v, want EAGAIN", err)
	}
}

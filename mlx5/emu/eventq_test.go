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

// An application that never reads its channel lets more events pend than the socket holds:
// the writer refills the socket from its pending list after each drain and blocks again.
// withdraw (a CQ destroyed) must still return: it drains whenever the writer is blocked.
// It waited for the writer after one drain only, and hung in a simulation's Close whose
// stepped failover context never read its backup device's channel.
func TestEventQueueWithdrawBehindFullSocket(t *testing.T) {
	q, err := newEventQueue("test")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		unix.Close(q.userFd) // first: a writer blocked on the full socket then returns
		q.close()
	}()
	for i := range 20000 {
		q.pushComp(uint64(i % 2))
	}
	done := make(chan int, 1)
	go func() { done <- q.withdraw(compFor(1)) }()
	select {
	case n := <-done:
		if n == 0 {
			t.Errorf("withdrew no event")
		}
	case <-time.After(30 * time.Second): // a failure guard only
		t.Fatal("withdraw hung behind the writer")
	}
}

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

// A withdraw with many events pending behind a full socket returns: the writer refills the
// socket between withdraw's drain and its wait for the writer, so withdraw drains before
// every wait. It hung once the application had left more async events unread than the socket
// holds (about ten: net.unix.max_dgram_qlen), at a CQ's destroy in internal/sim's recovery with
// two backups (seed 80 of a scan, by the goroutines' timing).
func TestEventQueueWithdrawBehindFullSocket(t *testing.T) {
	q, err := newEventQueue("test")
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(q.userFd)
	defer q.close()
	const n = 20000
	for i := range n {
		q.pushAsync(uint64(i), 9)
	}
	done := make(chan int, 1)
	go func() { done <- q.withdraw(func(ev []byte) bool { return binary.NativeEndian.Uint64(ev)%2 == 0 }) }()
	select {
	case got := <-done:
		if got != n/2 {
			t.Errorf("withdrew %d events, want %d", got, n/2)
		}
	case <-time.After(30 * time.Second): // a failure guard only: it returns in milliseconds
		t.Fatal("withdraw hung behind a full socket")
	}
}

package uverbs

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestEventsOverFD(t *testing.T) {
	// A SOCK_SEQPACKET pair keeps one event per read, as the kernel's event files do.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Skipf("socketpair not supported here: %v", err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	ok, err := WaitReadable(fds[0], 10*time.Millisecond)
	if err != nil || ok {
		t.Fatalf("empty fd readable=%v err=%v", ok, err)
	}
	ev := AsyncEventDesc{Element: 0xdeadbeef, Type: EventPortErr}
	if _, err := unix.Write(fds[1], ev.Bytes()); err != nil {
		t.Fatal(err)
	}
	if ok, err := WaitReadable(fds[0], 10*time.Second); !ok || err != nil {
		t.Fatalf("readable=%v err=%v", ok, err)
	}
	got, err := ReadAsyncEvent(fds[0])
	if err != nil || got != ev || EventName(got.Type) != "PORT_ERR" {
		t.Fatalf("got %+v %v", got, err)
	}
	ce := CompEventDesc{Handle: 0x1234}
	if _, err := unix.Write(fds[1], ce.Bytes()); err != nil {
		t.Fatal(err)
	}
	if gotc, err := ReadCompEvent(fds[0]); err != nil || gotc != ce {
		t.Fatalf("got %+v %v", gotc, err)
	}
	// A short event is malformed.
	if _, err := unix.Write(fds[1], []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCompEvent(fds[0]); !errors.Is(err, ErrMalformed) {
		t.Errorf("short event: %v", err)
	}
	if _, err := ReadAsyncEvent(-1); !errors.Is(err, unix.EBADF) {
		t.Errorf("bad fd: %v", err)
	}
}

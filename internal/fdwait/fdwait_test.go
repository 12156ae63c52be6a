package fdwait

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// pipe returns a non-blocking pipe, closed at the end of the test.
func pipe(t *testing.T) (r, w int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p[0], p[1]
}

// readOne is a try that reads one byte from fd into *got.
func readOne(fd int, got *[]byte) func() bool {
	return func() bool {
		var b [1]byte
		n, err := unix.Read(fd, b[:])
		if err == unix.EAGAIN {
			return false
		}
		if n == 1 {
			*got = append(*got, b[0])
		}
		return true
	}
}

// reading starts a Read of one byte from r's duplicate: the bytes read, and its result.
func reading(t *testing.T, r int) (*File, *[]byte, chan error) {
	t.Helper()
	f, err := Dup(r, "pipe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	got := new([]byte)
	done := make(chan error, 1)
	go func() { done <- f.Read(readOne(r, got)) }()
	return f, got, done
}

// A byte written while Read waits wakes it; one already there is read without waiting.
func TestReadWakes(t *testing.T) {
	r, w := pipe(t)
	f, got, done := reading(t, r)
	if _, err := unix.Write(w, []byte{7}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || len(*got) != 1 || (*got)[0] != 7 {
			t.Fatalf("Read: %v, got %v", err, *got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read did not return 10 s after the write")
	}
	if _, err := unix.Write(w, []byte{8}); err != nil {
		t.Fatal(err)
	}
	if err := f.Read(readOne(r, got)); err != nil || len(*got) != 2 || (*got)[1] != 8 {
		t.Fatalf("Read of a waiting byte: %v, got %v", err, *got)
	}
}

// Close and a past deadline end a Read that waits; the try reported nothing each time.
func TestReadEnds(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(*File)
		want error
	}{
		{"close", func(f *File) { f.Close() }, os.ErrClosed},
		{"deadline", func(f *File) { f.SetDeadline(time.Unix(1, 0)) }, os.ErrDeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := pipe(t)
			f, got, done := reading(t, r)
			c.end(f)
			select {
			case err := <-done:
				if !errors.Is(err, c.want) || len(*got) != 0 {
					t.Fatalf("Read: %v (got %v), want %v", err, *got, c.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Read did not end")
			}
		})
	}
}

// A regular file is not pollable: Dup says so and leaves no descriptor behind.
func TestDupNotPollable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	file, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := Dup(int(file.Fd()), "file"); !errors.Is(err, ErrNotPollable) {
		t.Fatalf("Dup of a regular file: %v, want ErrNotPollable", err)
	}
}

// Cancelling ReadContext's context ends its wait with the context's error, and leaves the
// File serving the next read (the deadline the cancel moved is cleared).
func TestReadContext(t *testing.T) {
	r, w := pipe(t)
	f, err := Dup(r, "pipe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var got []byte
	done := make(chan error, 1)
	go func() { done <- f.ReadContext(ctx, readOne(r, &got)) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || len(got) != 0 {
			t.Fatalf("ReadContext: %v (got %v), want context.Canceled", err, got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadContext did not end")
	}
	go func() { done <- f.ReadContext(context.Background(), readOne(r, &got)) }()
	if _, err := unix.Write(w, []byte{5}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || len(got) != 1 || got[0] != 5 {
			t.Fatalf("ReadContext after a cancelled one: %v (got %v), want the byte", err, got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadContext after a cancelled one did not return 10 s after the write")
	}
}

// Reopen's file wakes on a write like Dup's, and the pipe's own read end stays blocking (a
// completion channel's descriptor, read by libibverbs with read(2)); a regular file is
// refused, leaving no descriptor behind (TestMain's leak check).
func TestReopen(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	f, err := Reopen(p[0], "channel")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []byte
	done := make(chan error, 1)
	go func() { done <- f.ReadContext(context.Background(), readOne(f.Fd(), &got)) }()
	if _, err := unix.Write(p[1], []byte{9}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || len(got) != 1 || got[0] != 9 {
			t.Fatalf("Read: %v, got %v", err, got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read did not return 10 s after the write")
	}
	if fl, err := unix.FcntlInt(uintptr(p[0]), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Fatalf("the pipe's read end after Reopen: flags %#x, %v; want blocking", fl, err)
	}
	file, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := Reopen(int(file.Fd()), "file"); !errors.Is(err, ErrNotPollable) {
		t.Fatalf("Reopen of a regular file: %v, want ErrNotPollable", err)
	}
}

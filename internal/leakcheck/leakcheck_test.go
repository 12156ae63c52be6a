package leakcheck_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/internal/leakcheck"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		leakcheck.Main(m, leakcheck.Settle(100*time.Millisecond))
	}
	leakcheck.Main(m)
}

// leakErr asserts err is a *leakcheck.Error and returns it.
func leakErr(t *testing.T, err error) *leakcheck.Error {
	t.Helper()
	var e *leakcheck.Error
	if !errors.As(err, &e) {
		t.Fatalf("Leaks = %v, want a *leakcheck.Error", err)
	}
	return e
}

func TestCleanIsNil(t *testing.T) {
	s := leakcheck.Take()
	if err := s.Leaks(); err != nil {
		t.Fatalf("nothing leaked, Leaks = %v", err)
	}
}

func TestGoroutineLeak(t *testing.T) {
	s := leakcheck.Take()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { <-stop; close(done) }()
	e := leakErr(t, s.Leaks())
	if len(e.Goroutines) != 1 || !strings.Contains(e.Goroutines[0], "TestGoroutineLeak") {
		t.Errorf("leaked goroutines = %q, want the one TestGoroutineLeak started", e.Goroutines)
	}
	close(stop)
	<-done
	if err := s.Wait(); err != nil {
		t.Fatalf("after the goroutine exited: %v", err)
	}
}

func TestGoroutinesMatching(t *testing.T) {
	s := leakcheck.Take(leakcheck.GoroutinesMatching("no/such/package."))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { <-stop; close(done) }()
	defer func() { close(stop); <-done }()
	if err := s.Leaks(); err != nil {
		t.Fatalf("goroutine outside the matched package counted: %v", err)
	}
}

func TestFDLeak(t *testing.T) {
	s := leakcheck.Take()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	e := leakErr(t, s.Leaks())
	if len(e.FDs) != 2 || !strings.Contains(e.FDs[0], "pipe:") {
		t.Errorf("leaked descriptors = %q, want the two pipe ends", e.FDs)
	}
	if !strings.Contains(e.Error(), "2 file descriptors") {
		t.Errorf("report %q does not count the descriptors", e.Error())
	}
	r.Close()
	w.Close()
	if err := s.Leaks(); err != nil {
		t.Fatalf("after closing: %v", err)
	}
}

func TestFDsWithTarget(t *testing.T) {
	s := leakcheck.Take(leakcheck.FDsWithTarget("socket:"))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := s.Leaks(); err != nil {
		t.Fatalf("pipe counted by a socket-only check: %v", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := leakErr(t, s.Leaks())
	if len(e.FDs) != 2 || !strings.Contains(e.FDs[0], "socket:") {
		t.Errorf("leaked descriptors = %q, want the two sockets", e.FDs)
	}
	unix.Close(fds[0])
	unix.Close(fds[1])
}

func TestMapLeak(t *testing.T) {
	s := leakcheck.Take()
	b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	e := leakErr(t, s.Leaks())
	if len(e.Maps) != 1 || !strings.Contains(e.Maps[0], " rw-s ") {
		t.Errorf("leaked mappings = %q, want the one shared page", e.Maps)
	}
	if err := unix.Munmap(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Leaks(); err != nil {
		t.Fatalf("after unmapping: %v", err)
	}
	// A private mapping is the runtime's kind, not a leak.
	p, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(p)
	if err := s.Leaks(); err != nil {
		t.Fatalf("private mapping counted: %v", err)
	}
}

func TestNoOptions(t *testing.T) {
	s := leakcheck.Take(leakcheck.NoGoroutines(), leakcheck.NoFDs(), leakcheck.NoMaps())
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { <-stop; close(done) }()
	defer func() { close(stop); <-done }()
	if err := s.Leaks(); err != nil {
		t.Fatalf("disabled checks reported: %v", err)
	}
}

func TestCheckAndCounter(t *testing.T) {
	live := int64(3)
	var left error
	s := leakcheck.Take(
		leakcheck.Counter("buffers", func() int64 { return live }),
		leakcheck.Check("namespaces", func() error { return left }),
	)
	live, left = 4, errors.New("ns-1 still there")
	e := leakErr(t, s.Leaks())
	want := []string{"buffers: 4, 3 before the tests", "namespaces: ns-1 still there"}
	if len(e.Other) != 2 || e.Other[0] != want[0] || e.Other[1] != want[1] {
		t.Errorf("Other = %q, want %q", e.Other, want)
	}
	live, left = 3, nil
	if err := s.Leaks(); err != nil {
		t.Fatalf("after both recovered: %v", err)
	}
}

func TestWaitSettles(t *testing.T) {
	s := leakcheck.Take()
	done := make(chan struct{})
	go func() { time.Sleep(50 * time.Millisecond); close(done) }()
	if err := s.Wait(); err != nil {
		t.Fatalf("goroutine that exits on its own still reported: %v", err)
	}
	<-done
}

func TestWaitGivesUp(t *testing.T) {
	s := leakcheck.Take(leakcheck.Settle(50 * time.Millisecond))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { <-stop; close(done) }()
	defer func() { close(stop); <-done }()
	start := time.Now()
	leakErr(t, s.Wait())
	if time.Since(start) < 50*time.Millisecond {
		t.Errorf("Wait gave up before its settle time")
	}
}

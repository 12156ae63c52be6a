// Package netnstest creates network namespaces and veth pairs for tests that need real
// kernel networking between emulated hosts: uniquely named, with explicit interface indexes
// and addresses, removed by t.Cleanup even when the test fails. Tests that use it skip, saying
// why, when the process is not root or namespaces are unavailable.
package netnstest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netns"
)

// counter makes names unique within the process; the pid and a random part make them unique
// across processes and runs.
var counter atomic.Uint64

// created lists every namespace New made in this process, for the package's leak check: each
// must be gone once its test has ended.
var created struct {
	sync.Mutex
	names []string
}

// uniqueName returns prefix followed by a short name no other live test uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s%x%x%03x", prefix, os.Getpid()&0xfff, counter.Add(1)&0xff, rand.Uint32()&0xfff)
}

// Require skips the test unless the process can create network namespaces: it must be root
// and have the ip command (iproute2).
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespace tests need root (CAP_SYS_ADMIN, CAP_NET_ADMIN)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("network namespace tests need the ip command (iproute2)")
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		t.Skipf("network namespaces unavailable: %v", err)
	}
}

// NS is a named network namespace (visible to `ip netns`), deleted at the end of the test.
type NS struct {
	Name string

	lastIndex atomic.Int32 // interface indexes handed out by NewVeth, from 100 up
}

// allocIndex returns an interface index not yet used in the namespace by NewVeth.
func (ns *NS) allocIndex() int { return int(ns.lastIndex.Add(1)) + 99 }

// ErrNotPermitted is returned by Create when this process may not create namespaces.
var ErrNotPermitted = errors.New("netnstest: creating network namespaces is not permitted here")

// New creates a uniquely named network namespace with its loopback up, deleted at the end of
// the test, or skips the test if that is impossible here.
func New(t testing.TB) *NS {
	t.Helper()
	Require(t)
	ns, err := Create()
	if errors.Is(err, ErrNotPermitted) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Error(err)
		}
	})
	return ns
}

// Create creates a uniquely named network namespace with its loopback up, for callers that
// are not tests (the demo); Close deletes it. It needs root and the ip command.
func Create() (*NS, error) {
	var name string
	for try := 0; ; try++ {
		name = uniqueName("shift-")
		out, err := exec.Command("ip", "netns", "add", name).CombinedOutput()
		if err == nil {
			break
		}
		if bytes.Contains(out, []byte("ermission")) || bytes.Contains(out, []byte("not permitted")) {
			return nil, fmt.Errorf("%w: %s", ErrNotPermitted, bytes.TrimSpace(out))
		}
		// Another process may have drawn the same name; draw again.
		if !bytes.Contains(out, []byte("exists")) || try == 4 {
			return nil, fmt.Errorf("ip netns add %s: %v: %s", name, err, out)
		}
	}
	created.Lock()
	created.names = append(created.names, name)
	created.Unlock()
	ns := &NS{Name: name}
	if _, err := ns.Output("ip", "link", "set", "dev", "lo", "up"); err != nil {
		ns.Close()
		return nil, err
	}
	return ns, nil
}

// Close deletes the namespace, and with it the links in it.
func (ns *NS) Close() error {
	if out, err := exec.Command("ip", "netns", "del", ns.Name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns del %s: %v: %s", ns.Name, err, out)
	}
	return nil
}

// Do runs fn on an OS thread that has entered the namespace. Sockets and links fn creates
// belong to the namespace and stay there after Do returns. The thread is discarded
// afterwards rather than returned to the scheduler, so no other goroutine runs in the
// namespace by accident.
func (ns *NS) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// No UnlockOSThread: the goroutine exits with the thread locked, and the runtime
		// terminates the thread instead of reusing it.
		runtime.LockOSThread()
		h, err := netns.GetFromName(ns.Name)
		if err != nil {
			errc <- fmt.Errorf("netnstest: open namespace %s: %w", ns.Name, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- fmt.Errorf("netnstest: enter namespace %s: %w", ns.Name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// Command returns a command that runs name with args inside the namespace (through
// `ip netns exec`).
func (ns *NS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Run runs a command inside the namespace and returns its standard output; the test fails
// if it does not succeed.
func (ns *NS) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := ns.Output(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Output runs a command inside the namespace and returns its standard output, or an error
// carrying its standard error.
func (ns *NS) Output(name string, args ...string) (string, error) {
	cmd := ns.Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
		}
		return stdout.String(), fmt.Errorf("netnstest: in %s: %s %s: %w", ns.Name, name, strings.Join(args, " "), err)
	}
	return stdout.String(), nil
}

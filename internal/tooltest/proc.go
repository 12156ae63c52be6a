package tooltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/toolrun"
)

// Proc is a started program.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	out  syncBuffer // standard output: what the tools report
	log  syncBuffer // standard error: their errors and the plugin's (SHIFT_DEBUG=1)
	done chan struct{}
	err  error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Start runs name with args on host h's devices with mode m's environment, inside h's
// namespace if it has one. The program is killed at the end of the test if still running.
func (h *Host) Start(t testing.TB, m Mode, name string, args ...string) *Proc {
	t.Helper()
	var cmd *exec.Cmd
	if h.NS != nil {
		cmd = h.NS.Command(name, args...)
	} else {
		cmd = exec.Command(name, args...)
	}
	cmd.Env = h.Env(m)
	return startProc(t, name, cmd)
}

// startProc starts cmd as the program name; it is killed at the end of the test if still
// running.
func startProc(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Name: name, cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.out, &p.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("tooltest: start %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Wait waits for the program to end (killing it after timeout) and returns its standard
// output and how it ended; an error carries its standard error.
func (p *Proc) Wait(timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	select {
	case <-p.done:
	case <-ctx.Done():
		where := hungReport(p.Pid()) // before the kill: where its threads wait
		_ = p.cmd.Process.Kill()
		<-p.done
		return p.out.String(), fmt.Errorf("%s: killed after %v: %w\n%s%s", p.Name, timeout, ctx.Err(), p.log.String(), where)
	}
	if p.err != nil {
		return p.out.String(), fmt.Errorf("%s: %w\n%s", p.Name, p.err, p.log.String())
	}
	return p.out.String(), nil
}

// Pid is the program's process id (`ip netns exec` executes it in its own place, so the
// pid is the program's inside a namespace too).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Output is what the program printed so far, standard error then standard output.
func (p *Proc) Output() string { return p.log.String() + p.out.String() }

// Log is the program's standard error so far.
func (p *Proc) Log() string { return p.log.String() }

// Done reports whether the program has ended.
func (p *Proc) Done() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Pair runs a server and a client of a perftest-style program: the server starts first and
// listens on TCP port, the client connects to server (an address the client's namespace
// reaches). Both must end within timeout; it returns both outputs and errors.
type PairResult struct {
	Server, Client       string
	ServerErr, ClientErr error
}

// RunPair runs program with args on both hosts (server on hs, device sdev; client on hc,
// device cdev, connecting to addr) and waits for both.
//
// perftest converts its cycle counts with a CPU frequency it measures itself and gives up
// ("Correlation coefficient r^2 ... < 0.9", "Can't produce a report", exit 1) when the
// machine is too busy for the measurement to be linear; such a run says nothing about the
// provider, so it is repeated, up to twice, on another port (and logged). So is a run whose
// server ended before it listened: its port was taken by another process.
func RunPair(t testing.TB, hs, hc *Host, ms, mc Mode, program string, args []string, port int, sdev, cdev, addr string, timeout time.Duration) PairResult {
	t.Helper()
	for try := 0; ; try++ {
		r, listened := runPair(t, hs, hc, ms, mc, program, args, port+try, sdev, cdev, addr, timeout, try == 2)
		switch {
		case !listened:
			t.Logf("tooltest: %s server could not listen on %d; running it again on the next port", program, port+try)
		case try == 2 || !PerftestClockFailed(r.ClientErr, r.ServerErr):
			return r
		default:
			t.Logf("tooltest: %s could not measure its CPU clock on this busy machine; running it again", program)
		}
	}
}

// PerftestClockFailed reports a run in which perftest's own CPU-frequency measurement failed,
// from the errors of its processes (Proc.Wait's, which carry the output).
func PerftestClockFailed(errs ...error) bool {
	for _, e := range errs {
		if e != nil && toolrun.ClockFailed(e.Error()) {
			return true
		}
	}
	return false
}

// runPair is one try of RunPair; listened is false when the server ended before it listened
// (not on the last try, which fails the test instead).
func runPair(t testing.TB, hs, hc *Host, ms, mc Mode, program string, args []string, port int, sdev, cdev, addr string, timeout time.Duration, last bool) (r PairResult, listened bool) {
	t.Helper()
	pa := []string{"-p", strconv.Itoa(port)}
	srv := hs.Start(t, ms, program, append(append([]string{"-d", sdev}, pa...), args...)...)
	// The client connects once and gives up if nobody listens: start it when the server's
	// socket is listening.
	if err := srv.WaitListening(port, 20*time.Second); err != nil {
		// Standard error too: a server that ended early says why there (a provider's
		// create_qp, the emulated kernel's SHIFT_EMU_DEBUG lines), not on standard output.
		_, _ = srv.Wait(time.Second)
		out := srv.Output()
		if errors.Is(err, errEnded) && !last {
			t.Logf("tooltest: %s server: %v\n%s", program, err, out)
			return r, false
		}
		t.Fatalf("tooltest: %s server: %v\n%s", program, err, out)
	}
	cli := hc.Start(t, mc, program, append(append(append([]string{"-d", cdev}, pa...), args...), addr)...)
	r.Client, r.ClientErr = cli.Wait(timeout)
	r.Server, r.ServerErr = srv.Wait(timeout)
	return r, true
}

// errEnded: the program ended before it listened.
var errEnded = errors.New("ended")

// WaitListening waits until the program has a TCP socket listening on port (read from
// /proc/<pid>/net/tcp{,6}, which shows the program's own network namespace), or it ended, or
// d passed.
func (p *Proc) WaitListening(port int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for !toolrun.Listening(p.cmd.Process.Pid, port) {
		if p.Done() {
			return fmt.Errorf("%w before listening on %d", errEnded, port)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on TCP %d after %v", port, d)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shift-rdma/shift/internal/toolrun"
)

// The second part of the demo: an unmodified program, Debian's ib_write_bw (perftest),
// through the libibverbs plugin libmlx5-shift on emulated ConnectX NICs in two network
// namespaces, with host A's default rail pulled and brought back; once in plain mode (the
// plugin as a plain mlx5 provider: the program dies with a transport error) and once in
// SHIFT mode (SHIFT_BACKUP=s0:s1 with the link watcher, SHIFT_LINK_WATCH=1: it runs on). The timeline is each rail's bytes as host A's
// namespace counts them.

// ToolsConfig is the schedule of the tools part.
type ToolsConfig struct {
	PluginDir string        // holds libmlx5-shift-rdmav34.so (make plugin: bin)
	Duration  time.Duration // ib_write_bw -D, whole seconds
	FailAt    time.Duration // host A's rail 0 down
	RecoverAt time.Duration // and up again
	Interval  time.Duration // sampling of the rails' counters
}

// DefaultToolsConfig is what make demo runs.
func DefaultToolsConfig(pluginDir string) ToolsConfig {
	return ToolsConfig{PluginDir: pluginDir, Duration: 8 * time.Second, FailAt: 2500 * time.Millisecond,
		RecoverAt: 5500 * time.Millisecond, Interval: 100 * time.Millisecond}
}

// ToolsUnavailable says in one line why the tools part cannot run here, or "" when it can.
func ToolsUnavailable(c ToolsConfig) string {
	if os.Geteuid() != 0 {
		return "needs root (network namespaces and the /dev/infiniband stand-ins)"
	}
	for _, p := range []string{"ib_write_bw", "ip"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Sprintf("needs %s (Debian packages perftest and iproute2)", p)
		}
	}
	if _, err := os.Stat(filepath.Join(c.PluginDir, "libmlx5-shift-rdmav34.so")); err != nil {
		return fmt.Sprintf("no plugin in %s (make plugin builds it; it needs gcc and libibverbs-dev)", c.PluginDir)
	}
	return ""
}

// ToolSample is one interval of host A's rails: Gbit/s sent plus received on each.
type ToolSample struct {
	At    time.Duration
	Rails [2]float64
}

// ToolResult is one run of ib_write_bw.
type ToolResult struct {
	Mode     Mode
	Samples  []ToolSample
	Err      error         // how the client ended (nil: exit 0)
	EndedAt  time.Duration // when it ended
	Failure  string        // the client's error line, if it failed
	Log      string        // the head of the client's standard error (the provider's and perftest's complaints, a crash's report), if it failed
	AvgMBps  float64       // perftest's result line, if it finished
	Duration time.Duration
	// clockFailed: perftest could not measure its CPU clock for the report (a busy machine):
	// the run says nothing about the provider.
	clockFailed bool
}

// startGbps is the rail-0 rate from which a run's traffic counts as started (connection
// setup and SHIFT's control traffic stay far below it).
const startGbps = 0.001

// RunTools runs ib_write_bw once per mode over one toolNet, printing a progress line per run.
func RunTools(ctx context.Context, c ToolsConfig, modes []Mode, stdout io.Writer) ([]*ToolResult, error) {
	dir, err := filepath.Abs(c.PluginDir) // libibverbs reads RDMAV_DRIVERS in the programs' directory
	if err != nil {
		return nil, err
	}
	c.PluginDir = dir
	n, err := newToolNet()
	if err != nil {
		return nil, fmt.Errorf("demo: tools network: %w", err)
	}
	defer n.Close()
	var out []*ToolResult
	for _, m := range modes {
		r, err := runTool(ctx, c, n, m)
		for try := 0; err == nil && r.clockFailed && try < 2; try++ {
			fmt.Fprintf(stdout, "tools: %s: ib_write_bw could not measure its CPU clock on this busy machine; running it again\n", toolModeName(m))
			r, err = runTool(ctx, c, n, m)
		}
		if err != nil {
			return out, err
		}
		fmt.Fprintf(stdout, "tools: %s\n", r.Verdict())
		out = append(out, r)
	}
	return out, nil
}

// toolEnv is the environment selecting the plugin on host h's devices, in mode m.
func toolEnv(c ToolsConfig, n *toolNet, h int, m Mode, job string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "SYSFS_PATH" || name == "RDMAV_DRIVERS" || name == "IBV_DRIVERS" || name == "LD_PRELOAD" || strings.HasPrefix(name, "SHIFT") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "SYSFS_PATH="+n.trees[h].Root, "RDMAV_DRIVERS="+filepath.Join(c.PluginDir, "libmlx5-shift"))
	if m == ModeShift {
		// The link watcher: a down is seen in milliseconds instead of after the RC timeout.
		env = append(env, "SHIFT_BACKUP=s0:s1", "SHIFT_JOB="+job, "SHIFT_LINK_WATCH=1")
	}
	return env
}

// proc is a started program and how it ended: its standard output (perftest's result) and
// error (the provider's and perftest's complaints) apart.
type proc struct {
	cmd      *exec.Cmd
	out, log bytes.Buffer
	done     chan struct{}
	err      error
	at       time.Time
}

func startIn(n *toolNet, h int, env []string, args ...string) (*proc, error) {
	p := &proc{cmd: n.ns[h].Command(args[0], args[1:]...), done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.log
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		p.at = time.Now()
		close(p.done)
	}()
	return p, nil
}

// stop kills the program if it still runs and waits for it.
func (p *proc) stop() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) ended() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func runTool(ctx context.Context, c ToolsConfig, n *toolNet, m Mode) (*ToolResult, error) {
	job := fmt.Sprintf("demo-%d-%d", os.Getpid(), rand.Uint32())
	port := strconv.Itoa(20000 + rand.IntN(12000)) // below the ephemeral ports (32768 up)
	args := []string{"ib_write_bw", "-d", "s0", "-p", port, "-D", strconv.Itoa(int(c.Duration.Seconds())), "-s", "65536"}
	srv, err := startIn(n, 1, toolEnv(c, n, 1, m, job), args...)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	pt, _ := strconv.Atoi(port)
	for deadline := time.Now().Add(20 * time.Second); !toolrun.Listening(srv.cmd.Process.Pid, pt); {
		if srv.ended() || time.Now().After(deadline) {
			srv.stop()
			return nil, fmt.Errorf("demo: ib_write_bw server did not listen: %v\n%s%s", srv.err, srv.log.String(), srv.out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cli, err := startIn(n, 0, toolEnv(c, n, 0, m, job), append(args, n.ctl[1].Addr.Addr().String())...)
	if err != nil {
		return nil, err
	}
	defer cli.stop()
	start := time.Now()
	r := &ToolResult{Mode: m, Duration: c.Duration}
	rails := [2]string{n.rails[0][0].Name, n.rails[1][0].Name}
	// The counters from when the client is inside host A's namespace (ip netns exec enters
	// it before it runs ib_write_bw): they carry the earlier runs' bytes.
	var prev [2]uint64
	for deadline := start.Add(10 * time.Second); ; {
		if prev, err = railBytes(cli.cmd.Process.Pid, rails); err == nil {
			break
		}
		if cli.ended() || time.Now().After(deadline) {
			return nil, fmt.Errorf("demo: ib_write_bw client: %v\n%s%s", err, cli.log.String(), cli.out.String())
		}
		time.Sleep(time.Millisecond)
	}
	var once sync.Once
	restore := func() { once.Do(func() { n.rails[0][0].SetLink(true) }) }
	defer restore()
	down, up, flowing := false, false, false
	tick := time.NewTicker(c.Interval)
	defer tick.Stop()
	limit := c.Duration + 30*time.Second
	for !cli.ended() {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-cli.done:
			continue
		case now := <-tick.C:
			cur, err := railBytes(cli.cmd.Process.Pid, rails)
			if err != nil {
				continue // the program just ended
			}
			var rates [2]float64
			for i := range cur {
				rates[i] = float64(cur[i]-prev[i]) * 8 / c.Interval.Seconds() / 1e9
			}
			prev = cur
			if !flowing {
				// The schedule counts from the first traffic on rail 0, not from the
				// program's start: setting up (the plugin, SHIFT's shadow QPs, the
				// connection exchange) takes longer on a loaded machine.
				if rates[0] < startGbps {
					if now.Sub(start) > limit {
						return r, fmt.Errorf("demo: ib_write_bw (%s) sent nothing on rail 0 in %v", m, limit)
					}
					continue
				}
				flowing, start = true, now.Add(-c.Interval)
			}
			at := now.Sub(start)
			r.Samples = append(r.Samples, ToolSample{At: at, Rails: rates})
			if !down && at >= c.FailAt {
				if err := n.rails[0][0].SetLink(false); err != nil {
					return r, err
				}
				down = true
			}
			if down && !up && at >= c.RecoverAt {
				restore()
				up = true
			}
			if at > limit {
				return r, fmt.Errorf("demo: ib_write_bw (%s) still running after %v", m, limit)
			}
		}
	}
	r.Err, r.EndedAt = cli.err, cli.at.Sub(start)
	out := cli.out.String()
	if r.Err != nil {
		r.clockFailed = toolrun.ClockFailed(cli.log.String() + out)
		r.Failure = failureLine(cli.log.String() + out)
		r.Log = headOf(cli.log.String(), 16<<10)
	} else if bw, err := toolrun.ParseBW(out); err == nil {
		r.AvgMBps = bw.AvgMBps
	} else {
		r.Err = err
	}
	return r, nil
}

// railBytes is the bytes sent plus received on each rail of host A, from the namespace of
// the program pid.
func railBytes(pid int, rails [2]string) ([2]uint64, error) {
	var out [2]uint64
	s, err := toolrun.ReadNetdev(fmt.Sprintf("/proc/%d/net/dev", pid))
	if err != nil {
		return out, err
	}
	for i, r := range rails {
		st, ok := s[r]
		if !ok {
			return out, fmt.Errorf("no %s in the namespace of process %d", r, pid)
		}
		out[i] = st.TxBytes + st.RxBytes
	}
	return out, nil
}

// headOf is the first n bytes of s, where a crash says what it was.
func headOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "\n[...]"
}

// failureLine is the line of perftest's output that says why it stopped.
func failureLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "Failed status") || strings.Contains(l, "Couldn't") {
			return strings.TrimSpace(l)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// onRail is the first sample time at or after from with rail i carrying at least 10 % of
// the peak rate of the run, or -1.
func (r *ToolResult) onRail(i int, from time.Duration) time.Duration {
	peak := 0.0
	for _, s := range r.Samples {
		peak = max(peak, s.Rails[0]+s.Rails[1])
	}
	for _, s := range r.Samples {
		if s.At >= from && s.Rails[i] > 0.1*peak {
			return s.At
		}
	}
	return -1
}

// Verdict is one line: how the program ended, and where its traffic went.
func (r *ToolResult) Verdict() string {
	if r.Err != nil {
		return fmt.Sprintf("%s: ib_write_bw failed at %.1f s (%v): %s", toolModeName(r.Mode), r.EndedAt.Seconds(), r.Err, r.Failure)
	}
	return fmt.Sprintf("%s: ib_write_bw exit 0 after %.1f s, %.1f MB/s average", toolModeName(r.Mode), r.EndedAt.Seconds(), r.AvgMBps)
}

// Broken reports a run that failed the demo's promise: SHIFT mode did not carry the program
// through.
func (r *ToolResult) Broken() bool { return r.Mode == ModeShift && r.Err != nil }

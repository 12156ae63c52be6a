package vmtest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Step is what one guest step (a Command, a Binary, or a setup step of the harness) did.
type Step struct {
	// Name is the step's name as configured.
	Name string
	// Ran is false when the guest never started the step (setup failed or the run ended).
	Ran bool
	// Finished is true when the guest reported the step's exit status.
	Finished bool
	// ExitCode is the step's exit status (meaningful only when Finished).
	ExitCode int
	// Output holds the lines the step wrote to stdout and stderr, interleaved.
	Output []string
	// Duration is the guest time from start to end.
	Duration time.Duration
}

// Passed reports whether the step ran to completion with exit status 0.
func (s Step) Passed() bool { return s.Finished && s.ExitCode == 0 }

// Result is the outcome of one guest run.
type Result struct {
	// Kernel is the guest kernel's version (the module directory name).
	Kernel string
	// Accel is the QEMU accelerator used: "tcg" or "kvm".
	Accel string
	// Boot is the guest uptime when /init started: kernel boot plus initramfs unpacking.
	Boot time.Duration
	// GuestTime is the guest uptime when /init finished its steps.
	GuestTime time.Duration
	// Wall is the host time QEMU ran, from start to exit.
	Wall time.Duration
	// InitramfsBytes is the size of the guest's root file system archive.
	InitramfsBytes int64
	// Setup holds the harness's own steps (module loads, rxe0 creation), in order.
	Setup []Step
	// Steps holds the configured commands and binaries, in order.
	Steps []Step
	// Done is true when the guest reached the end of /init.
	Done bool
	// Console is the guest's kernel console (ttyS0).
	Console string
	// Protocol is the raw line protocol from ttyS1.
	Protocol string
}

// Step returns the step called name.
func (r *Result) Step(name string) (Step, bool) {
	for _, s := range r.Steps {
		if s.Name == name {
			return s, true
		}
	}
	return Step{}, false
}

// parseProtocol fills r's Boot, GuestTime, Done, Setup and Steps from the guest's ttyS1
// output. names lists the configured steps, so steps that never ran appear with Ran false.
func parseProtocol(r *Result, out string, names []string) error {
	r.Protocol = out
	steps := map[string]*Step{}
	var setupOrder []string
	var cur *Step
	var begin float64
	for _, line := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		// A step whose last output line has no newline leaves the next marker mid-line.
		if i := strings.Index(line, marker); i > 0 {
			if cur != nil {
				cur.Output = append(cur.Output, line[:i])
			}
			line = line[i:]
		}
		rest, ok := strings.CutPrefix(line, marker)
		if !ok {
			if cur != nil {
				cur.Output = append(cur.Output, line)
			}
			continue
		}
		f := strings.Fields(rest)
		bad := func() error { return fmt.Errorf("vmtest: malformed guest protocol line %q", line) }
		switch {
		case len(f) == 2 && f[0] == "boot":
			up, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return bad()
			}
			r.Boot = seconds(up)
		case len(f) == 3 && f[0] == "begin":
			up, err := strconv.ParseFloat(f[2], 64)
			if err != nil || cur != nil {
				return bad()
			}
			cur = &Step{Name: f[1], Ran: true}
			if strings.HasPrefix(cur.Name, setupPrefix) {
				setupOrder = append(setupOrder, cur.Name)
			}
			steps[cur.Name], begin = cur, up
		case len(f) == 4 && f[0] == "end":
			rc, err1 := strconv.Atoi(f[2])
			up, err2 := strconv.ParseFloat(f[3], 64)
			if err1 != nil || err2 != nil || cur == nil || cur.Name != f[1] {
				return bad()
			}
			cur.Finished, cur.ExitCode, cur.Duration = true, rc, seconds(up-begin)
			cur = nil
		case len(f) == 2 && f[0] == "done":
			up, err := strconv.ParseFloat(f[1], 64)
			if err != nil || cur != nil {
				return bad()
			}
			r.GuestTime, r.Done = seconds(up), true
		default:
			return bad()
		}
	}
	if cur != nil && len(cur.Output) > 0 && cur.Output[len(cur.Output)-1] == "" {
		cur.Output = cur.Output[:len(cur.Output)-1]
	}
	for _, n := range setupOrder {
		s := *steps[n]
		s.Name = strings.TrimPrefix(n, setupPrefix)
		r.Setup = append(r.Setup, s)
	}
	for _, n := range names {
		if s, ok := steps[n]; ok {
			r.Steps = append(r.Steps, *s)
		} else {
			r.Steps = append(r.Steps, Step{Name: n})
		}
	}
	return nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// GoTestReport summarises the -test.v output of a Go test binary.
type GoTestReport struct {
	// Passed, Failed and Skipped list top-level and subtest names by their final status.
	Passed, Failed, Skipped []string
	// NoTests is set when the binary said no test matched -test.run.
	NoTests bool
	// Ok is set when the binary's last status line was PASS.
	Ok bool
}

// ParseGoTest reads the output of a test binary run with -test.v.
func ParseGoTest(lines []string) GoTestReport {
	var r GoTestReport
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "--- PASS: "):
			r.Passed = append(r.Passed, testName(t))
		case strings.HasPrefix(t, "--- FAIL: "):
			r.Failed = append(r.Failed, testName(t))
		case strings.HasPrefix(t, "--- SKIP: "):
			r.Skipped = append(r.Skipped, testName(t))
		case strings.HasPrefix(t, "testing: warning: no tests to run"):
			r.NoTests = true
		case l == "PASS":
			r.Ok = true
		case l == "FAIL":
			r.Ok = false
		}
	}
	return r
}

// testName takes "TestX/sub" out of "--- PASS: TestX/sub (0.00s)".
func testName(line string) string {
	f := strings.Fields(line)
	if len(f) < 3 {
		return ""
	}
	return f[2]
}

package demo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Main is the demo's command line (see the package documentation for the flags); it returns
// the exit status: 0 when every requested mode ran and the shift runs kept the application
// free of errors, 1 when a mode could not run, a shift run let an error through to the
// application, or an output could not be written, 2 for bad flags. Errors in a provider run
// do not change the status: showing that the baseline dies is that mode's point.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: shiftctl demo [flags]   (emulated hosts, traffic, a pulled link, the failover, a plot)")
		fs.PrintDefaults()
	}
	var c Config
	mode := fs.String("mode", "all", "provider, shift (the failure found by the RC timeout), shift-watch (found by the link event), both (provider and shift) or all")
	out := fs.String("out", "out/demo", "output directory for timeline.csv, timeline.svg and timeline.png")
	fs.DurationVar(&c.Duration, "duration", 15e9, "length of each run")
	c.FailAt, c.RecoverAt = 5e9, 10e9
	fs.Var((*schedule)(&c.FailAt), "fail-at", "when the default NIC's link goes down: a duration, or never (also any negative number); 0: the default")
	fs.IntVar(&c.FailHost, "fail-host", 0, "whose default NIC fails: 0 (the senders' host) or 1 (the receivers')")
	fs.Var((*schedule)(&c.RecoverAt), "recover-at", "when it comes back: a duration, or never (also any negative number); 0: the default")
	fs.DurationVar(&c.Interval, "interval", 1e8, "throughput sampling interval")
	timeout := fs.Uint("timeout", 14, "RC local ACK timeout exponent (4.096 µs × 2^n per try, 7 retries)")
	fs.Uint64Var(&c.Seed, "seed", 1, "fabric seed")
	quiet := fs.Bool("quiet", false, "no live progress line (it is shown only on a terminal anyway)")
	table := fs.Bool("table", false, "also print the per-interval throughput table (timeline.csv has it)")
	tools := fs.String("tools", "auto", "the unmodified-ib_write_bw part: auto (when it can run), on, off")
	pluginDir := fs.String("plugin", "bin", "directory of libmlx5-shift-rdmav34.so for the tools part")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	c.Timeout = uint8(min(*timeout, 255))
	if c.FailAt < 0 {
		c.FailAt = -1
	}
	if c.RecoverAt < 0 {
		c.RecoverAt = -1
	}
	modes, err := ParseModes(*mode)
	if err == nil && *tools != "auto" && *tools != "on" && *tools != "off" {
		err = fmt.Errorf("demo: -tools %q: want auto, on or off", *tools)
	}
	if err == nil {
		err = c.Defaults().Validate()
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var runs []*Result
	var failed []string
	status := 0
	for _, m := range modes {
		var progress io.Writer
		if !*quiet && isTerminal(stdout) {
			progress = stdout // a live line rewritten with \r: only where a person watches it
		}
		d := c.Defaults()
		if d.hasFailure() {
			fmt.Fprintf(stdout, "== %s mode: %v run, host %d NIC0 link down at %v, up at %v\n", m, d.Duration, d.FailHost, d.FailAt, (*schedule)(&d.RecoverAt))
		} else {
			fmt.Fprintf(stdout, "== %s mode: %v run, no link failure\n", m, d.Duration)
		}
		r, err := Run(ctx, c, m, progress)
		if err != nil {
			fmt.Fprintf(stdout, "%s: did not run: %v\n", m, err)
			failed = append(failed, fmt.Sprintf("%s: did not run (%v)", m, err))
			status = 1
			if r == nil || errors.Is(err, context.Canceled) {
				continue
			}
		}
		if *table {
			if err := WriteTable(stdout, r); err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
		}
		runs = append(runs, r)
	}
	if len(runs) > 0 {
		files, err := WriteOutputs(*out, runs)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		for _, f := range files {
			fmt.Fprintln(stdout, "wrote", f)
		}
	}
	for _, r := range runs {
		for _, n := range r.Notes() {
			fmt.Fprintf(stdout, "%s: %s\n", r.Mode, n)
		}
	}
	if c := CompareRates(runs); c != "" {
		fmt.Fprintln(stdout, c)
	}
	var verdicts []string
	for _, r := range runs {
		verdicts = append(verdicts, "verdict "+r.Verdict())
		if broken(r) {
			status = 1
		}
	}
	for _, f := range failed {
		verdicts = append(verdicts, "verdict "+f)
	}
	if *tools != "off" {
		// The tools part runs plain and SHIFT; the plugin's link watcher is its own setting.
		var toolModes []Mode
		for _, m := range modes {
			if m != ModeShiftWatch {
				toolModes = append(toolModes, m)
			}
		}
		st, tv := runToolsPart(ctx, DefaultToolsConfig(*pluginDir), toolModes, *tools == "on", filepath.Join(*out, "tools"), stdout)
		if st != 0 {
			status = st
		}
		verdicts = append(verdicts, tv...)
	}
	// The verdicts stand together at the end, after everything else the demo printed.
	for _, v := range verdicts {
		fmt.Fprintln(stdout, v)
	}
	return status
}

// isTerminal reports whether w is a terminal (a live progress line makes sense there only).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// runToolsPart runs the tools part, or says in one line why it cannot (a failure when
// required); its status is 1 when SHIFT did not carry the program through. It returns its
// verdict lines for the caller to print last.
func runToolsPart(ctx context.Context, c ToolsConfig, modes []Mode, required bool, out string, stdout io.Writer) (int, []string) {
	if why := ToolsUnavailable(c); why != "" {
		fmt.Fprintf(stdout, "tools: unmodified ib_write_bw through libmlx5-shift not shown: %s\n", why)
		if required {
			return 1, nil
		}
		return 0, nil
	}
	fmt.Fprintf(stdout, "== unmodified ib_write_bw through libmlx5-shift: two network namespaces, host A's rail 0 down at %v, up at %v\n",
		c.FailAt, c.RecoverAt)
	runs, err := RunTools(ctx, c, modes, stdout)
	status := 0
	var verdicts []string
	if err != nil {
		fmt.Fprintf(stdout, "tools: %v\n", err)
		status = 1
	}
	if len(runs) > 0 {
		files, err := WriteToolsOutputs(out, c, runs)
		if err != nil {
			fmt.Fprintf(stdout, "tools: %v\n", err)
			return 1, nil
		}
		for _, f := range files {
			fmt.Fprintln(stdout, "wrote", f)
		}
	}
	for _, r := range runs {
		for _, n := range r.Notes(c) {
			fmt.Fprintf(stdout, "tools: %s: %s\n", toolModeName(r.Mode), n)
		}
		verdicts = append(verdicts, "verdict tools "+r.Verdict())
		if r.Broken() {
			status = 1
		}
	}
	return status, verdicts
}

// WriteOutputs writes timeline.csv, timeline.svg and timeline.png under dir and returns their
// paths.
func WriteOutputs(dir string, runs []*Result) ([]string, error) {
	ch := NewTimelineChart(runs)
	return writeFiles(dir, func(w io.Writer) error { return WriteCSV(w, runs) }, ch)
}

// WriteToolsOutputs is WriteOutputs for the tools part.
func WriteToolsOutputs(dir string, cfg ToolsConfig, runs []*ToolResult) ([]string, error) {
	ch := withLinkMarkers(NewToolsChart(runs), cfg)
	return writeFiles(dir, func(w io.Writer) error { return WriteToolsCSV(w, runs) }, ch)
}

// writeFiles writes timeline.csv with csv, and timeline.svg and timeline.png of ch, under
// dir.
func writeFiles(dir string, csv func(io.Writer) error, ch *Chart) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("demo: output directory: %w", err)
	}
	var files []string
	for _, o := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"timeline.csv", csv},
		{"timeline.svg", ch.WriteSVG},
		{"timeline.png", ch.WritePNG},
	} {
		p := filepath.Join(dir, o.name)
		f, err := os.Create(p)
		if err != nil {
			return files, fmt.Errorf("demo: %w", err)
		}
		err = o.write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, fmt.Errorf("demo: write %s: %w", p, err)
		}
		files = append(files, p)
	}
	return files, nil
}

// broken reports a run that failed the demo's promise: SHIFT let an error through.
func broken(r *Result) bool { return r.Mode.shifts() && len(r.Errors()) > 0 }

// schedule is a -fail-at or -recover-at value: a duration, or never (the word, or any
// negative number, with or without a unit), stored as -1.
type schedule time.Duration

func (s *schedule) String() string {
	if s == nil {
		return ""
	}
	if *s < 0 {
		return "never"
	}
	return time.Duration(*s).String()
}

func (s *schedule) Set(v string) error {
	if v == "never" {
		*s = -1
		return nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f >= 0 {
			return fmt.Errorf("%q: a duration needs a unit (e.g. 5s), or never / a negative number", v)
		}
		*s = -1
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	if d < 0 {
		d = -1
	}
	*s = schedule(d)
	return nil
}

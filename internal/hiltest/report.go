package hiltest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// TestEvent is one line of `go test -json` (cmd/test2json's TestEvent).
type TestEvent struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// Result is one test's outcome in a HIL run.
type Result struct {
	Package, Test string
	Action        string // pass, fail or skip
	Elapsed       time.Duration
	Output        []string // the test's own lines (t.Log, failures, skip reasons)
}

// ReadResults collects the outcome of every test (and subtest) of a `go test -json` stream,
// in the order they finished, and the packages that failed without a test to blame (a build
// error, a panic outside a test, a timeout).
func ReadResults(r io.Reader) (results []Result, pkgFailures []Result, err error) {
	out := map[string][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev TestEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue // go test's own lines (build output) are not JSON
		}
		key := ev.Package + " " + ev.Test
		switch ev.Action {
		case "output":
			if line := strings.TrimRight(ev.Output, "\n"); keepLine(line) {
				out[key] = append(out[key], line)
			}
		case "pass", "fail", "skip":
			res := Result{Package: ev.Package, Test: ev.Test, Action: ev.Action,
				Elapsed: time.Duration(ev.Elapsed * float64(time.Second)), Output: out[key]}
			if ev.Test != "" {
				results = append(results, res)
			} else if ev.Action == "fail" {
				pkgFailures = append(pkgFailures, res)
			}
		}
	}
	return results, pkgFailures, sc.Err()
}

// keepLine drops go test's own framing lines; the tests' log lines stay.
func keepLine(l string) bool {
	t := strings.TrimSpace(l)
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "--- PASS", "--- FAIL", "--- SKIP", "PASS", "FAIL", "ok  "} {
		if strings.HasPrefix(t, p) {
			return false
		}
	}
	return t != ""
}

// WriteReport writes the HIL report in Markdown: the machine, the devices, then one row per
// test and the log lines of every test that logged, failed or skipped. It returns the number
// of failures.
func WriteReport(w io.Writer, results, pkgFailures []Result, devices []string, sysfs string) (int, error) {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# SHIFT hardware-in-the-loop report\n\n")
	fmt.Fprintf(&b, "- host: %s\n- kernel: %s\n- devices (SHIFT_HIL_DEVICES): %s\n\n", host, readTrim("/proc/sys/kernel/osrelease"), strings.Join(devices, ", "))
	fmt.Fprintf(&b, "| device | fw_ver | board_id | node_guid | port 1 state | netdev |\n|---|---|---|---|---|---|\n")
	for _, d := range devices {
		dir := filepath.Join(sysfs, "class/infiniband", d)
		nd := ""
		if n, err := Netdev(d); err == nil {
			nd = n
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", d, readTrim(dir+"/fw_ver"), readTrim(dir+"/board_id"),
			readTrim(dir+"/node_guid"), readTrim(dir+"/ports/1/state"), nd)
	}
	counts := map[string]int{}
	for _, r := range results {
		counts[r.Action]++
	}
	fails := counts["fail"] + len(pkgFailures)
	fmt.Fprintf(&b, "\n%d passed, %d failed, %d skipped\n\n| package | test | result | time |\n|---|---|---|---|\n",
		counts["pass"], fails, counts["skip"])
	sorted := append([]Result(nil), results...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Package != sorted[j].Package {
			return sorted[i].Package < sorted[j].Package
		}
		return sorted[i].Test < sorted[j].Test
	})
	for _, r := range sorted {
		fmt.Fprintf(&b, "| %s | %s | %s | %v |\n", shortPkg(r.Package), r.Test, strings.ToUpper(r.Action), r.Elapsed.Round(time.Millisecond))
	}
	for _, r := range pkgFailures {
		fmt.Fprintf(&b, "| %s | (package) | FAIL | %v |\n", shortPkg(r.Package), r.Elapsed.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "\n## Logs\n")
	for _, r := range append(sorted, pkgFailures...) {
		if len(r.Output) == 0 {
			continue
		}
		name := r.Test
		if name == "" {
			name = "(package)"
		}
		fmt.Fprintf(&b, "\n### %s %s: %s\n\n```\n%s\n```\n", shortPkg(r.Package), name, strings.ToUpper(r.Action), strings.Join(r.Output, "\n"))
	}
	_, err := io.WriteString(w, b.String())
	return fails, err
}

func shortPkg(p string) string { return strings.TrimPrefix(p, "github.com/shift-rdma/shift/") }

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

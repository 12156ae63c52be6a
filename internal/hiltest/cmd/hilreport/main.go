// Command hilreport turns the `go test -json` output of a hardware-in-the-loop run (make hil)
// into a Markdown report a rack operator can send back: the machine, the devices with their
// firmware, every HIL test's result and the figures the tests logged. It exits 1 when a test
// failed.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/shift-rdma/shift/internal/hiltest"
)

func main() {
	out := flag.String("o", "out/hil/report.md", "report file")
	flag.Parse()
	results, pkgFailures, err := hiltest.ReadResults(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hilreport:", err)
		os.Exit(2)
	}
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hilreport:", err)
		os.Exit(2)
	}
	var devs []string
	if d := os.Getenv("SHIFT_HIL_DEVICES"); d != "" {
		devs = strings.Split(d, ",")
	}
	fails, err := hiltest.WriteReport(f, results, pkgFailures, devs, "/sys")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hilreport:", err)
		os.Exit(2)
	}
	fmt.Printf("hilreport: %d tests, %d failed; report in %s\n", len(results), fails, *out)
	if fails > 0 || len(results) == 0 {
		os.Exit(1)
	}
}

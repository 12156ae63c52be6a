package hiltest

import (
	"strings"
	"testing"
)

// A go test -json stream of one passing subtest with a log line, a skipped test, a failed
// one and a package that failed to build.
const stream = `{"Action":"run","Package":"github.com/shift-rdma/shift/failover","Test":"TestHIL"}
{"Action":"output","Package":"github.com/shift-rdma/shift/failover","Test":"TestHIL/Fallback","Output":"=== RUN   TestHIL/Fallback\n"}
{"Action":"output","Package":"github.com/shift-rdma/shift/failover","Test":"TestHIL/Fallback","Output":"    hil_test.go:115: fallback latency 2.1ms\n"}
{"Action":"output","Package":"github.com/shift-rdma/shift/failover","Test":"TestHIL/Fallback","Output":"--- PASS: TestHIL/Fallback (0.30s)\n"}
{"Action":"pass","Package":"github.com/shift-rdma/shift/failover","Test":"TestHIL/Fallback","Elapsed":0.3}
{"Action":"pass","Package":"github.com/shift-rdma/shift/failover","Test":"TestHIL","Elapsed":0.31}
{"Action":"output","Package":"github.com/shift-rdma/shift/fence","Test":"TestHILPlumbing","Output":"    hil_test.go:25: real devices configured\n"}
{"Action":"skip","Package":"github.com/shift-rdma/shift/fence","Test":"TestHILPlumbing","Elapsed":0}
{"Action":"output","Package":"github.com/shift-rdma/shift/probe","Test":"TestHIL/netlink","Output":"    hil_test.go:60: no up=true event within 1m0s\n"}
{"Action":"fail","Package":"github.com/shift-rdma/shift/probe","Test":"TestHIL/netlink","Elapsed":60}
not json: a build line
{"Action":"fail","Package":"github.com/shift-rdma/shift/provider/plugin","Elapsed":0.1}
`

func TestReport(t *testing.T) {
	res, pkg, err := ReadResults(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 || len(pkg) != 1 {
		t.Fatalf("%d results, %d package failures: %+v %+v", len(res), len(pkg), res, pkg)
	}
	if res[0].Test != "TestHIL/Fallback" || len(res[0].Output) != 1 || !strings.Contains(res[0].Output[0], "fallback latency 2.1ms") {
		t.Errorf("first result %+v", res[0])
	}
	var b strings.Builder
	fails, err := WriteReport(&b, res, pkg, []string{"mlx5_0", "mlx5_1"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if fails != 2 {
		t.Errorf("%d failures, want 2 (the probe test and the plugin package)", fails)
	}
	for _, want := range []string{"2 passed, 2 failed, 1 skipped", "| failover | TestHIL/Fallback | PASS |",
		"| probe | TestHIL/netlink | FAIL |", "| provider/plugin | (package) | FAIL |", "fallback latency 2.1ms",
		"no up=true event", "| mlx5_0 | ? |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

package vmtest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestParseProtocol(t *testing.T) {
	out := strings.Join([]string{
		"@@VMTEST boot 2.50",
		"@@VMTEST begin setup:rxe 2.60",
		"@@VMTEST end setup:rxe 0 2.70",
		"@@VMTEST begin a 3.00",
		"line one\r",
		"",
		"line three",
		"@@VMTEST end a 1 4.25",
		"@@VMTEST begin b 4.30",
		"half written",
		"",
	}, "\n")
	var r Result
	if err := parseProtocol(&r, out, []string{"a", "b", "c"}); err != nil {
		t.Fatal(err)
	}
	if r.Boot != 2500*time.Millisecond || r.Done {
		t.Errorf("boot %v done %v, want 2.5s and not done", r.Boot, r.Done)
	}
	if len(r.Setup) != 1 || r.Setup[0].Name != "rxe" || !r.Setup[0].Passed() {
		t.Errorf("setup %+v, want one passed step rxe", r.Setup)
	}
	a, _ := r.Step("a")
	if !a.Finished || a.ExitCode != 1 || a.Passed() || a.Duration != 1250*time.Millisecond ||
		fmt.Sprintf("%q", a.Output) != `["line one" "" "line three"]` {
		t.Errorf("step a = %+v", a)
	}
	b, _ := r.Step("b")
	if !b.Ran || b.Finished || b.Passed() || fmt.Sprintf("%q", b.Output) != `["half written"]` {
		t.Errorf("step b (cut off) = %+v", b)
	}
	c, ok := r.Step("c")
	if !ok || c.Ran || c.Passed() {
		t.Errorf("step c (never started) = %+v, found %v", c, ok)
	}

	var nonl Result
	if err := parseProtocol(&nonl, "@@VMTEST begin a 1\nno newline@@VMTEST end a 0 2\n", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if a, _ := nonl.Step("a"); !a.Passed() || fmt.Sprintf("%q", a.Output) != `["no newline"]` {
		t.Errorf("output without a final newline: %+v", a)
	}

	var done Result
	if err := parseProtocol(&done, "@@VMTEST boot 1\n@@VMTEST done 9.5\n", nil); err != nil || !done.Done || done.GuestTime != 9500*time.Millisecond {
		t.Errorf("done run: %+v, %v", done, err)
	}
	for _, bad := range []string{
		"@@VMTEST end a 0 1.0",                   // end without begin
		"@@VMTEST begin a 1\n@@VMTEST begin b 2", // nested begin
		"@@VMTEST begin a 1\n@@VMTEST end b 0 2", // end of another step
		"@@VMTEST begin a 1\n@@VMTEST end a x 2", // bad exit code
		"@@VMTEST boot soon",                     // bad uptime
		"@@VMTEST reboot",                        // unknown verb
		"@@VMTEST begin a 1\n@@VMTEST done 2",    // done inside a step
	} {
		var r Result
		if err := parseProtocol(&r, bad, nil); err == nil {
			t.Errorf("malformed protocol accepted: %q", bad)
		}
	}
}

func TestParseGoTest(t *testing.T) {
	out := strings.Split(`=== RUN   TestKernelA
--- PASS: TestKernelA (0.01s)
=== RUN   TestKernelB
=== RUN   TestKernelB/sub
    --- FAIL: TestKernelB/sub (0.00s)
--- FAIL: TestKernelB (0.00s)
=== RUN   TestKernelC
    x_test.go:1: no device
--- SKIP: TestKernelC (0.00s)
FAIL`, "\n")
	r := ParseGoTest(out)
	if fmt.Sprint(r.Passed, r.Failed, r.Skipped, r.Ok, r.NoTests) != "[TestKernelA] [TestKernelB/sub TestKernelB] [TestKernelC] false false" {
		t.Errorf("got %+v", r)
	}
	r = ParseGoTest([]string{"testing: warning: no tests to run", "PASS"})
	if !r.NoTests || !r.Ok || len(r.Passed) != 0 {
		t.Errorf("no-tests run: %+v", r)
	}
}

// TestShellQuote runs the quoted words through the host's sh, the same kind of shell the
// guest's busybox provides, and checks that every word comes back unchanged.
func TestShellQuote(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this host")
	}
	words := []string{"plain", "two words", "it's", `"dq"`, "$HOME", "`id`", `back\slash`, "new\nline", "", "*", "'"}
	out, err := exec.Command(sh, "-c", `for w in `+shellWords(words)+`; do printf '[%s]' "$w"; done`).Output()
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, w := range words {
		want.WriteString("[" + w + "]")
	}
	if string(out) != want.String() {
		t.Errorf("sh saw %q, want %q", out, want.String())
	}
}

func TestInitScriptSyntax(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this host")
	}
	s := initScript("6.1.0-test", []string{"dummy"}, map[string]string{"dummy": "kernel/drivers/net/dummy.ko"},
		[]guestStep{{"x", []string{"/tests/x.test", "-test.run", "Kernel|It's"}}})
	if out, err := exec.Command(sh, "-n", "-c", s).CombinedOutput(); err != nil {
		t.Fatalf("generated /init does not parse: %v: %s\n%s", err, out, s)
	}
	for _, want := range []string{
		"step setup:insmod:dummy 'insmod' '/lib/modules/6.1.0-test/kernel/drivers/net/dummy.ko'",
		"step setup:rxe 'rdma' 'link' 'add' 'rxe0' 'type' 'rxe' 'netdev' 'dummy0'",
		`step x '/tests/x.test' '-test.run' 'Kernel|It'\''s'`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("/init lacks %q", want)
		}
	}
}

func TestParseLdd(t *testing.T) {
	libs, err := parseLdd(`	linux-vdso.so.1 (0x00007ffd)
	libmnl.so.0 => /lib/x86_64-linux-gnu/libmnl.so.0 (0x00007f84)
	/lib64/ld-linux-x86-64.so.2 (0x00007f84)
`)
	if err != nil || fmt.Sprint(libs) != "[/lib/x86_64-linux-gnu/libmnl.so.0 /lib64/ld-linux-x86-64.so.2]" {
		t.Errorf("got %v, %v", libs, err)
	}
	if _, err := parseLdd("\tlibfoo.so.1 => not found\n"); err == nil {
		t.Error("unresolved library accepted")
	}
}

func TestModuleOrder(t *testing.T) {
	graph := map[string][]string{
		"rdma_rxe":   {"ib_uverbs", "ib_core", "udp_tunnel"},
		"ib_uverbs":  {"ib_core"},
		"ib_core":    nil,
		"udp_tunnel": nil,
		"dummy":      nil,
		"loop_a":     {"loop_b"},
		"loop_b":     {"loop_a"},
	}
	deps := func(n string) ([]string, error) {
		d, ok := graph[n]
		if !ok {
			return nil, fmt.Errorf("no module %s", n)
		}
		return d, nil
	}
	order, err := moduleOrder([]string{"dummy", "rdma-rxe", "ib_uverbs"}, deps)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(order) != "[dummy ib_core ib_uverbs udp_tunnel rdma_rxe]" {
		t.Errorf("order %v", order)
	}
	if _, err := moduleOrder([]string{"loop_a"}, deps); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("cycle not reported: %v", err)
	}
	if _, err := moduleOrder([]string{"nosuch"}, deps); err == nil {
		t.Error("missing module not reported")
	}
}

func TestConfigNormalize(t *testing.T) {
	c, err := Config{Binaries: []Binary{{Path: "/x/uverbs.test"}}}.normalize()
	if err != nil || c.Binaries[0].Name != "uverbs.test" || c.MemoryMB != defaultMemoryMB || c.CPUs != defaultCPUs || c.Timeout != defaultTimeout {
		t.Errorf("defaults: %+v, %v", c, err)
	}
	for _, bad := range []Config{
		{Commands: []Command{{Name: "a b", Argv: []string{"true"}}}},
		{Commands: []Command{{Name: "setup:x", Argv: []string{"true"}}}},
		{Commands: []Command{{Name: "a", Argv: []string{"true"}}}, Binaries: []Binary{{Name: "a", Path: "/a"}}},
		{Commands: []Command{{Name: "a"}}},
		{Binaries: []Binary{{Name: "b"}}},
	} {
		if _, err := bad.normalize(); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

func TestChooseAccel(t *testing.T) {
	t.Setenv(EnvAccel, "tcg")
	if a, err := chooseAccel(); a != "tcg" || err != nil {
		t.Errorf("forced tcg: %q %v", a, err)
	}
	t.Setenv(EnvAccel, "xen")
	if _, err := chooseAccel(); err == nil {
		t.Error("bad accelerator accepted")
	}
	t.Setenv(EnvAccel, "auto")
	a, err := chooseAccel()
	if err != nil || (a != "tcg" && a != "kvm") {
		t.Errorf("auto: %q %v", a, err)
	}
	t.Logf("auto picks %s on this host", a)
}

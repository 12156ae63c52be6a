package shiftenv

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/internal/rundir"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

func mapEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestRead(t *testing.T) {
	e, err := Read(mapEnv(map[string]string{"SHIFT_KV": "dir:/kv", "SHIFT_JOB": "j", "SHIFT_INJECT": "all:3",
		"SHIFT_INJECT_SHM": "1", "XDG_RUNTIME_DIR": "/run/user/7", "SHIFT_BACKUP": "mlx5_0:mlx5_1, mlx5_0:mlx5_2"}))
	if err != nil {
		t.Fatal(err)
	}
	if e.KV != "dir:/kv" || e.Job != "j" || e.Inject != "all:3" || !e.Control || e.RunDir != "/run/user/7/shift" ||
		len(e.Backups["mlx5_0"]) != 2 || e.Backups["mlx5_0"][1] != "mlx5_2" || e.Provider != (provider.Options{}) {
		t.Fatalf("%+v", e)
	}
	e, err = Read(mapEnv(nil))
	if err != nil || e.Backups != nil || e.KV != "" || e.Job != "" || e.Control || e.RunDir != rundir.Default() {
		t.Fatalf("empty environment: %+v %v", e, err)
	}
	for _, v := range []string{"0", "true", "yes"} { // only 1 turns the control file on
		if e, _ := Read(mapEnv(map[string]string{"SHIFT_INJECT_SHM": v})); e.Control {
			t.Errorf("SHIFT_INJECT_SHM=%s turned the control file on", v)
		}
	}
	if _, err := Read(mapEnv(map[string]string{"SHIFT_BACKUP": "mlx5_0"})); !errors.Is(err, failover.ErrBadConfig) || !strings.Contains(err.Error(), "SHIFT_BACKUP") {
		t.Errorf("bad SHIFT_BACKUP: %v", err)
	}
	if _, err := Read(mapEnv(map[string]string{"MLX5_TOTAL_UUARS": "0"})); !errors.Is(err, unix.EINVAL) {
		t.Errorf("MLX5_TOTAL_UUARS=0: %v, want EINVAL", err)
	}
}

// MLX5_TOTAL_UUARS and MLX5_NUM_LOW_LAT_UUARS are read as libmlx5 reads them (C's atoi) and
// checked as libmlx5's mlx5_init_context checks them, with its errnos; the errors name the
// variables.
func TestProviderOptions(t *testing.T) {
	if unix.Getpagesize() != 4096 {
		t.Skip("the table's rounding assumes 4 KiB pages")
	}
	cases := []struct {
		total, low string
		wantTot    int
		wantLow    int // -1: nil
		errno      unix.Errno
	}{
		{"", "", 0, -1, 0},              // libmlx5's defaults
		{"300", "", 300, -1, 0},         // raised to total-12 by the provider
		{"7", "", 7, -1, 0},             // rounded up by the provider
		{"1", "0", 1, 0, 0},             // at least one page's worth
		{"1", "", 0, 0, unix.ENOMEM},    // 4 low-latency of 2
		{"512", "", 512, -1, 0},         // MLX5_MAX_BFREGS
		{"513", "", 0, 0, unix.ENOMEM},  // above it once rounded
		{"0", "", 0, 0, unix.EINVAL},    // atoi: no bfregs
		{"abc", "", 0, 0, unix.EINVAL},  // atoi reads 0
		{"16", "-1", 0, 0, unix.EINVAL}, // negative low latency
		{"16", "x", 16, 0, 0},           // atoi reads 0, raised to total-12
		{"16", "16", 0, 0, unix.ENOMEM}, // no bfreg left for bfreg 0
		{"16", "15", 16, 15, 0},         // every BlueFlame bfreg low latency
		{" 24junk", "2", 24, 2, 0},      // atoi stops at the junk
	}
	for _, c := range cases {
		o, err := ProviderOptions(mapEnv(map[string]string{"MLX5_TOTAL_UUARS": c.total, "MLX5_NUM_LOW_LAT_UUARS": c.low}))
		if c.errno != 0 {
			if !errors.Is(err, c.errno) || !errors.Is(err, verbs.ErrInvalidArgument) || !strings.Contains(err.Error(), "MLX5_") {
				t.Errorf("total %q low %q: err %v, want %v naming the variable", c.total, c.low, err, c.errno)
			}
			continue
		}
		low := -1
		if o.LowLatencyBfregs != nil {
			low = *o.LowLatencyBfregs
		}
		if err != nil || o.TotalBfregs != c.wantTot || low != c.wantLow {
			t.Errorf("total %q low %q: %d/%d %v, want %d/%d", c.total, c.low, o.TotalBfregs, low, err, c.wantTot, c.wantLow)
		}
	}
}

func TestFill(t *testing.T) {
	env := mapEnv(map[string]string{"SHIFT_KV": "dir:/kv", "SHIFT_JOB": "j", "SHIFT_INJECT": "0x1a:2",
		"SHIFT_INJECT_SHM": "1", "XDG_RUNTIME_DIR": "/run/user/7", "SHIFT_BACKUP": "mlx5_0:mlx5_1,mlx5_1:mlx5_0",
		"MLX5_TOTAL_UUARS": "32"})
	o, err := Options(env, "mlx5_0")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Backups) != 1 || o.Backups[0] != "mlx5_1" || o.KVAddr != "dir:/kv" || o.Job != "j" || !o.ControlFile ||
		o.RunDir != "/run/user/7/shift" || o.Inject != (failover.InjectSpec{QPN: 0x1a, N: 2}) || o.Provider.TotalBfregs != 32 {
		t.Fatalf("%+v", o)
	}
	// What the caller set wins, as it did over the variables when the library read them.
	e, err := Read(env)
	if err != nil {
		t.Fatal(err)
	}
	mine := failover.Options{Backups: []string{"mlx5_9"}, KVAddr: "dir:/mine", Job: "mine", InjectFile: "/f",
		RunDir: "/mine", Inject: failover.InjectSpec{N: 7}, Provider: provider.Options{TotalBfregs: 64}}
	o = mine
	if err := e.Fill(&o, "mlx5_0"); err != nil {
		t.Fatal(err)
	}
	if o.Backups[0] != "mlx5_9" || o.KVAddr != "dir:/mine" || o.Job != "mine" || o.ControlFile || o.RunDir != "/mine" ||
		o.Inject.N != 7 || o.Provider.TotalBfregs != 64 {
		t.Fatalf("caller's Options overridden: %+v", o)
	}
	// A device SHIFT_BACKUP names no backup for: the error names the variable and the device.
	if _, err := Options(env, "mlx5_2"); !errors.Is(err, failover.ErrNoBackup) || err.Error() != "SHIFT_BACKUP names no backup for mlx5_2: "+failover.ErrNoBackup.Error() {
		t.Errorf("no backup: %v", err)
	}
	// A bad SHIFT_INJECT fails the SHIFT context (Fill), not Read.
	bad := mapEnv(map[string]string{"SHIFT_INJECT": "all:0"})
	if _, err := Read(bad); err != nil {
		t.Errorf("Read refused a bad SHIFT_INJECT: %v", err)
	}
	if _, err := Options(bad, "mlx5_0"); !errors.Is(err, failover.ErrBadConfig) || !strings.HasPrefix(err.Error(), "SHIFT_INJECT: ") {
		t.Errorf("bad SHIFT_INJECT: %v", err)
	}
	// Unset: automatic backups, the embedded store in the default runtime directory.
	o, err = Options(mapEnv(nil), "mlx5_0")
	if err != nil || o.Backups != nil || o.KVAddr != "" || o.Job != "" || o.ControlFile || o.RunDir != rundir.Default() {
		t.Fatalf("empty environment: %+v %v", o, err)
	}
}

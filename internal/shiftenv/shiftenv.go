// Package shiftenv reads, once and at SHIFT's edges, the environment variables that
// configure the libraries: the libibverbs plugin (provider/plugin), shiftctl and the demo
// call Read and Fill; packages failover and provider take Options and read no environment
// variable themselves (README "Environment variables"). Errors name the variable.
package shiftenv

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/internal/rundir"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Env is what the environment asks of packages failover and provider.
type Env struct {
	// Backups is SHIFT_BACKUP parsed (failover.ParseBackupMap): each default device's
	// backups; nil when unset (automatic selection).
	Backups map[string][]string
	// KV is SHIFT_KV: the KV store's address (failover.Options.KVAddr).
	KV string
	// Job is SHIFT_JOB ("": the library's "default").
	Job string
	// Inject is SHIFT_INJECT as set ("<qpn|all>:<n>"), parsed by Fill: a bad value fails
	// the SHIFT contexts, as the library did when it read the variable, not plain mode.
	Inject string
	// Control is SHIFT_INJECT_SHM=1: each process maps a control file of its own
	// (failover.Options.ControlFile).
	Control bool
	// RunDir is the user's runtime directory, $XDG_RUNTIME_DIR/shift where XDG_RUNTIME_DIR
	// is set, else /dev/shm/shift-<uid> (rundir.Path).
	RunDir string
	// Provider are MLX5_TOTAL_UUARS and MLX5_NUM_LOW_LAT_UUARS as libmlx5 reads them (C's
	// atoi), checked against this system's page size (provider.Options.Check).
	Provider provider.Options
}

// Read reads the variables through getenv (os.Getenv at the edges, a map in tests).
func Read(getenv func(string) string) (Env, error) {
	e := Env{KV: getenv("SHIFT_KV"), Job: getenv("SHIFT_JOB"), Inject: getenv("SHIFT_INJECT"),
		Control: getenv("SHIFT_INJECT_SHM") == "1", RunDir: rundir.Path(getenv)}
	if b := getenv("SHIFT_BACKUP"); b != "" {
		m, err := failover.ParseBackupMap(b) // its errors name SHIFT_BACKUP
		if err != nil {
			return e, err
		}
		e.Backups = m
	}
	var err error
	e.Provider, err = ProviderOptions(getenv)
	return e, err
}

// ProviderOptions reads libmlx5's MLX5_TOTAL_UUARS and MLX5_NUM_LOW_LAT_UUARS, for an edge
// that opens plain provider contexts (Env.Provider is the same).
func ProviderOptions(getenv func(string) string) (provider.Options, error) {
	var o provider.Options
	total, low := getenv("MLX5_TOTAL_UUARS"), getenv("MLX5_NUM_LOW_LAT_UUARS")
	if total != "" {
		if o.TotalBfregs = atoi(total); o.TotalBfregs < 1 {
			return o, fmt.Errorf("MLX5_TOTAL_UUARS=%q: want at least 1 bfreg: %w (%w)", total, verbs.ErrInvalidArgument, unix.EINVAL)
		}
	}
	if low != "" {
		n := atoi(low)
		if n < 0 {
			return o, fmt.Errorf("MLX5_NUM_LOW_LAT_UUARS=%q: want 0 or more bfregs: %w (%w)", low, verbs.ErrInvalidArgument, unix.EINVAL)
		}
		o.LowLatencyBfregs = &n
	}
	if err := o.Check(); err != nil {
		return o, fmt.Errorf("MLX5_TOTAL_UUARS=%q, MLX5_NUM_LOW_LAT_UUARS=%q: %w", total, low, err)
	}
	return o, nil
}

// Fill sets the fields of o that the environment sets and o leaves zero, for a SHIFT context
// whose default device is dev: Backups (SHIFT_BACKUP's backups of dev; an error wrapping
// failover.ErrNoBackup when SHIFT_BACKUP is set and names none), KVAddr, Job, ControlFile
// (unless o names an InjectFile), RunDir and Provider; Inject from SHIFT_INJECT (an error
// wrapping failover.ErrBadConfig when it does not parse). Fields the caller set win, as
// they did over the variables when the library read them.
func (e Env) Fill(o *failover.Options, dev string) error {
	if len(o.Backups) == 0 && e.Backups != nil {
		if o.Backups = e.Backups[dev]; len(o.Backups) == 0 {
			return fmt.Errorf("SHIFT_BACKUP names no backup for %s: %w", dev, failover.ErrNoBackup)
		}
	}
	if o.KV == nil && o.KVAddr == "" {
		o.KVAddr = e.KV
	}
	if o.Job == "" {
		o.Job = e.Job
	}
	if o.InjectFile == "" && e.Control {
		o.ControlFile = true
	}
	if o.RunDir == "" {
		o.RunDir = e.RunDir
	}
	if o.Provider == (provider.Options{}) {
		o.Provider = e.Provider
	}
	if o.Inject == (failover.InjectSpec{}) && e.Inject != "" {
		spec, err := failover.ParseInject(e.Inject)
		if err != nil {
			return fmt.Errorf("SHIFT_INJECT: %w", err)
		}
		o.Inject = spec
	}
	return nil
}

// Options are the failover.Options of a SHIFT context on default device dev that the
// environment alone asks for: Read, then Fill on zero Options.
func Options(getenv func(string) string, dev string) (failover.Options, error) {
	var o failover.Options
	e, err := Read(getenv)
	if err == nil {
		err = e.Fill(&o, dev)
	}
	return o, err
}

// atoi is C's atoi, as libmlx5 reads its variables: optional blanks and sign, then the
// leading digits; anything else ends the number, and no digits read as 0.
func atoi(s string) int {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	n := 0
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		n = n*10 + int(s[i]-'0')
		if n > 1<<31 {
			n = 1 << 31 // atoi overflow is undefined; saturating keeps the checks meaningful
		}
	}
	if neg {
		return -n
	}
	return n
}

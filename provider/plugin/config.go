package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/internal/shiftenv"
)

// config is what the environment asks of the plugin, read once (the plugin is the edge where
// the environment is read; the packages below take Options).
type config struct {
	// env is what the libraries are asked (internal/shiftenv): SHIFT_BACKUP, SHIFT_KV,
	// SHIFT_JOB, SHIFT_INJECT, SHIFT_INJECT_SHM, XDG_RUNTIME_DIR, MLX5_TOTAL_UUARS and
	// MLX5_NUM_LOW_LAT_UUARS.
	env    shiftenv.Env
	shift  bool // SHIFT mode: SHIFT_BACKUP set, or SHIFT=1
	gidIdx int  // SHIFT_GID_INDEX, -1: each device's preferred GID
	debug  bool // SHIFT_DEBUG=1: control-path errors on stderr
	// SHIFT_LINK_WATCH: the link watcher of each default device: "1" required, "0" (or
	// "off") none, unset the library's default (on for hardware devices with a netdev).
	watch, noWatch bool
	// SHIFT_STATUS_INTERVAL: how often each context rewrites its status file for shiftctl
	// status and metrics (0: the library's default; negative: none).
	statusInterval time.Duration
	// SHIFT_CQ_WATCHDOG: the completion watchdog's bound (0: the library's default;
	// negative: off).
	cqWatchdog time.Duration
	// SHIFT_PROBE_INTERVAL and SHIFT_FENCE_AFTER ("<n>,<duration>"): recovery settings (0:
	// the library's defaults).
	probeInterval time.Duration
	fenceAfterWRs int
	fenceAfter    time.Duration
	// cData: SHIFT mode's Default-state posts and polls in C (spost.c, spoll.c);
	// SHIFT_C_DATAPATH=0 leaves them to Go.
	cData bool
}

var loadConfig = sync.OnceValues(func() (config, error) {
	c := config{gidIdx: -1, debug: os.Getenv("SHIFT_DEBUG") == "1", cData: true}
	var err error
	if c.env, err = shiftenv.Read(os.Getenv); err != nil {
		return c, err
	}
	// Posts run in cgo callbacks: an emulated NIC's wake would yield the application's
	// thread (provider.Options.NoDeviceWake).
	c.env.Provider.NoDeviceWake = true
	c.shift = c.env.Backups != nil
	if c.watch, c.noWatch, err = parseLinkWatch(os.Getenv("SHIFT_LINK_WATCH")); err != nil {
		return c, err
	}
	switch s := os.Getenv("SHIFT_C_DATAPATH"); s {
	case "", "1":
	case "0":
		c.cData = false
	default:
		return c, fmt.Errorf("SHIFT_C_DATAPATH=%q: want 1 (SHIFT mode's posts and polls in C, the default) or 0 (through Go)", s)
	}
	switch s := os.Getenv("SHIFT"); s {
	case "", "0":
	case "1":
		c.shift = true
	default:
		return c, fmt.Errorf("SHIFT=%q: want 1 (on) or 0 (off)", s)
	}
	if s := os.Getenv("SHIFT_GID_INDEX"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || v > 255 {
			return c, fmt.Errorf("SHIFT_GID_INDEX=%q: want a GID index 0..255", s)
		}
		c.gidIdx = v
	}
	if s := os.Getenv("SHIFT_STATUS_INTERVAL"); s != "" {
		d, err := parseStatusInterval(s)
		if err != nil {
			return c, err
		}
		c.statusInterval = d
	}
	if s := os.Getenv("SHIFT_CQ_WATCHDOG"); s != "" {
		d, err := parseCQWatchdog(s)
		if err != nil {
			return c, err
		}
		c.cqWatchdog = d
	}
	if s := os.Getenv("SHIFT_PROBE_INTERVAL"); s != "" {
		if c.probeInterval, err = failover.ParseProbeInterval(s); err != nil {
			return c, err
		}
	}
	if s := os.Getenv("SHIFT_FENCE_AFTER"); s != "" {
		if c.fenceAfterWRs, c.fenceAfter, err = failover.ParseFenceAfter(s); err != nil {
			return c, err
		}
	}
	return c, nil
})

// parseCQWatchdog reads SHIFT_CQ_WATCHDOG: a positive Go duration ("2s", "500ms"), or "off"
// (also "0") for no watchdog.
func parseCQWatchdog(s string) (time.Duration, error) {
	if s == "off" || s == "0" {
		return -1, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("SHIFT_CQ_WATCHDOG=%q: want a positive duration (500ms, 10s) or off", s)
	}
	return d, nil
}

// parseStatusInterval reads SHIFT_STATUS_INTERVAL: a positive Go duration ("500ms", "5s"), or
// "off" (also "0") for no status file.
func parseStatusInterval(s string) (time.Duration, error) {
	if s == "off" || s == "0" {
		return -1, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("SHIFT_STATUS_INTERVAL=%q: want a positive duration (500ms, 5s) or off", s)
	}
	return d, nil
}

// store is the KV store of every SHIFT context of the process, opened on first use.
var store struct {
	sync.Mutex
	kv kv.Store
}

func openStore(c config) (kv.Store, error) {
	store.Lock()
	defer store.Unlock()
	if store.kv != nil {
		return store.kv, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := kv.OpenDefault(ctx, c.env.KV, cmp.Or(c.env.Job, "default"), c.env.RunDir)
	if err != nil {
		return nil, fmt.Errorf("SHIFT_KV: %w", err)
	}
	store.kv = s
	return s, nil
}

// failoverOptions are the Options of a SHIFT context on device name.
// The store is the process's one (openStore); the rest of what the environment sets comes
// from shiftenv (Env.Fill).
func failoverOptions(c config, name string) (failover.Options, error) {
	o := failover.Options{GIDIndex: c.gidIdx, WatchLink: c.watch, NoLinkWatch: c.noWatch, StatusInterval: c.statusInterval, CQWatchdog: c.cqWatchdog,
		ProbeInterval: c.probeInterval, FenceAfter: c.fenceAfter, FenceAfterWRs: c.fenceAfterWRs}
	if err := c.env.Fill(&o, name); err != nil {
		return o, err
	}
	s, err := openStore(c)
	if err != nil {
		return o, err
	}
	o.KV = s
	return o, nil
}

// parseLinkWatch reads SHIFT_LINK_WATCH: "1" requires the link watcher, "0" or "off" turns
// it off, "" leaves the library's default (on for hardware devices whose port has a netdev).
func parseLinkWatch(s string) (require, off bool, err error) {
	switch s {
	case "":
		return false, false, nil
	case "1":
		return true, false, nil
	case "0", "off":
		return false, true, nil
	}
	return false, false, fmt.Errorf("SHIFT_LINK_WATCH=%q: want 1 (required), 0 or off (none), or unset (on where a hardware port has a netdev)", s)
}

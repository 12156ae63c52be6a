package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
	"github.com/shift-rdma/shift/uverbs"
	"golang.org/x/sys/unix"
)

const statusUsage = `  status [-json] [-sysfs ROOT] [-w DURATION [-n N]]
         devices, ports (state, active MTU, link layer), GIDs with their netdevs, each
         netdev's operstate, carrier and carrier_down_count, and the SHIFT processes of the
         host with their QPs (state, NIC in use, backups, counters), read from the status
         files they publish in the runtime directory (the caller's own processes; as root,
         every user's); exit 0 also when there is no RDMA device
    -json        print one JSON object (for scripts) instead of tables
    -sysfs ROOT  sysfs mount point to discover from (default $SYSFS_PATH, else /sys); with a
                 ROOT other than the default the devices found there are not opened, so
                 their MTU is not queried
    -w DURATION  print the report again every DURATION until interrupted (with -json, one
                 JSON object per report)
    -n N         with -w, stop after N reports (0: until interrupted)`

// statusReport is what shiftctl status prints; its JSON form is the scripting interface.
type statusReport struct {
	SysfsRoot string         `json:"sysfs_root"`
	Devices   []deviceStatus `json:"devices"`
	Netdevs   []netdevStatus `json:"netdevs"`
	// Shift is the SHIFT processes of the host (their status files).
	Shift processReport `json:"shift"`
}

type deviceStatus struct {
	Name       string       `json:"name"`
	Uverbs     string       `json:"uverbs,omitempty"`
	Emulated   bool         `json:"emulated"`
	NodeGUID   string       `json:"node_guid,omitempty"`
	ABIVersion int          `json:"abi_version"`
	Ports      []portStatus `json:"ports"`
	// Queried tells whether the port state and MTU come from query_port on an opened
	// device (live) rather than from discovery alone.
	Queried    bool   `json:"queried"`
	QueryError string `json:"query_error,omitempty"`
}

type portStatus struct {
	Num       int         `json:"num"`
	State     string      `json:"state"`
	PhysState string      `json:"phys_state,omitempty"`
	LinkLayer string      `json:"link_layer,omitempty"`
	ActiveMTU int         `json:"active_mtu,omitempty"` // bytes; 0: not queried
	MaxMTU    int         `json:"max_mtu,omitempty"`
	Netdev    string      `json:"netdev,omitempty"`
	GIDs      []gidStatus `json:"gids"`
}

type gidStatus struct {
	Index  int    `json:"index"`
	GID    string `json:"gid"`
	Type   string `json:"type,omitempty"`
	Netdev string `json:"netdev,omitempty"`
}

// netdevStatus is a network device as sysfs shows it (class/net/<name>).
type netdevStatus struct {
	Name    string `json:"name"`
	Present bool   `json:"present"` // false: no class/net entry (an emulated port's netdev)
	// OperState is RFC 2863 operstate ("up", "down", "lowerlayerdown", "unknown", ...).
	OperState string `json:"operstate,omitempty"`
	// Carrier is 1 or 0, nil when the kernel refuses to tell (interface administratively down).
	Carrier          *int    `json:"carrier,omitempty"`
	CarrierDownCount *uint64 `json:"carrier_down_count,omitempty"`
	MTU              int     `json:"mtu,omitempty"`
	Error            string  `json:"error,omitempty"`
}

// portQuerier opens a device by name for query_port; tests replace it.
type portQuerier func(name string) (func(port uint8) (verbs.PortAttr, error), func() error, error)

// providerQuerier opens the device through the Go provider (the mlx5 ucontext that the
// kernel requires before QUERY_PORT) and queries its ports.
func providerQuerier(name string) (func(uint8) (verbs.PortAttr, error), func() error, error) {
	c, err := provider.Open(name)
	if err != nil {
		return nil, nil, err
	}
	return c.QueryPort, c.Close, nil
}

func statusMain(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "")
	root := fs.String("sysfs", "", "")
	every := fs.Duration("w", 0, "")
	count := fs.Int("n", 0, "")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		_, err = fmt.Fprintln(stdout, statusUsage)
		return err
	} else if err != nil {
		return usageError{fmt.Errorf("%w\n%s", err, statusUsage)}
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("unexpected argument %q: %w\n%s", fs.Arg(0), unix.EINVAL, statusUsage)}
	}
	switch {
	case *every < 0:
		return usageError{fmt.Errorf("-w %v: want a positive interval: %w\n%s", *every, unix.EINVAL, statusUsage)}
	case *count < 0 || *count > 0 && *every == 0:
		return usageError{fmt.Errorf("-n %d: want a count of reports with -w: %w\n%s", *count, unix.EINVAL, statusUsage)}
	}
	for n := 1; ; n++ {
		rep, err := collectStatus(*root, providerQuerier)
		if err != nil {
			return err
		}
		rep.Shift = collectProcesses(os.Getenv)
		if *every > 0 && !*asJSON {
			if _, err := fmt.Fprintf(stdout, "%s(every %v)\n\n", refreshHeader(n), *every); err != nil {
				return err
			}
		}
		if *asJSON {
			err = rep.writeJSON(stdout)
		} else {
			err = rep.writeTable(stdout)
		}
		if err != nil || *every == 0 || n == *count {
			return err
		}
		if statusRefreshHook != nil {
			statusRefreshHook(n)
		}
		time.Sleep(*every)
	}
}

// statusRefreshHook, when set (tests), runs after report n of status -w, before the wait for
// the next.
var statusRefreshHook func(n int)

// refreshHeader opens report n of status -w.
func refreshHeader(n int) string {
	sep := ""
	if n > 1 {
		sep = "\n"
	}
	return fmt.Sprintf("%s=== shiftctl status, report %d, %s ", sep, n, time.Now().Format(time.RFC3339))
}

// collectStatus discovers the devices of the sysfs tree at root ("" for the default) plus
// the emulated devices registered in this process, queries the ports of those it can open,
// and reads the netdevs their ports and GIDs name.
func collectStatus(root string, query portQuerier) (*statusReport, error) {
	s := uverbs.DefaultSysfs()
	openSysfs := true
	if root != "" && root != s.Root {
		s = uverbs.Sysfs{Root: root}
		openSysfs = false // provider.Open discovers through the default sysfs only
	}
	rep := &statusReport{SysfsRoot: s.Root}
	if rep.SysfsRoot == "" {
		rep.SysfsRoot = "/sys"
	}
	// A root that is not a sysfs mount is the caller's mistake, not a host without devices.
	if st, err := os.Stat(filepath.Join(rep.SysfsRoot, "class")); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("-sysfs %s: no class/ directory there (not a sysfs tree): %w", rep.SysfsRoot, unix.ENOENT)
	}
	devs, err := s.ListAll()
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	seen := map[string]bool{}
	var netdevs []string
	addNetdev := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			netdevs = append(netdevs, n)
		}
	}
	for _, d := range devs {
		ds := deviceStatus{Name: d.Name, Uverbs: d.Uverbs, Emulated: d.Emulated, NodeGUID: d.NodeGUID, ABIVersion: d.ABIVersion}
		var qp func(uint8) (verbs.PortAttr, error)
		if query != nil && (d.Emulated || openSysfs) {
			q, closeFn, err := query(d.Name)
			if err != nil {
				ds.QueryError = err.Error()
			} else {
				qp = q
				defer closeFn()
			}
		}
		ds.Queried = qp != nil
		for _, p := range d.Ports {
			ps := portStatus{Num: p.Num, State: p.StateName, PhysState: p.PhysState, LinkLayer: p.LinkLayer, Netdev: p.Netdev}
			if ps.State == "" {
				ps.State = portStateName(uint8(p.State))
			}
			if qp != nil {
				a, err := qp(uint8(p.Num))
				if err != nil {
					ds.QueryError = err.Error()
					ds.Queried = false
				} else {
					ps.State = portStateName(uint8(a.State))
					if d.Emulated {
						// An emulated device's discovery record is a snapshot taken at
						// registration; query_port does not report the physical state.
						ps.PhysState = ""
					}
					ps.ActiveMTU, ps.MaxMTU = mtuBytes(a.ActiveMTU), mtuBytes(a.MaxMTU)
				}
			}
			addNetdev(p.Netdev)
			for _, g := range p.GIDs {
				ps.GIDs = append(ps.GIDs, gidStatus{Index: g.Index, GID: g.GID.String(), Type: g.Type, Netdev: g.Netdev})
				addNetdev(g.Netdev)
			}
			ds.Ports = append(ds.Ports, ps)
		}
		rep.Devices = append(rep.Devices, ds)
	}
	for _, n := range netdevs {
		rep.Netdevs = append(rep.Netdevs, readNetdev(s.Root, n))
	}
	return rep, nil
}

// portStateName names enum ibv_port_state as ibv_devinfo prints it.
func portStateName(s uint8) string {
	switch s {
	case 0:
		return "NOP"
	case uverbs.PortDown:
		return "DOWN"
	case 2:
		return "INIT"
	case 3:
		return "ARMED"
	case uverbs.PortActive:
		return "ACTIVE"
	case uverbs.PortActiveDefer:
		return "ACTIVE_DEFER"
	}
	return "state " + strconv.Itoa(int(s))
}

// mtuBytes converts enum ibv_mtu (1: 256 … 5: 4096) to bytes; 0 for anything else.
func mtuBytes(m uint8) int {
	if m < uverbs.MTU256 || m > uverbs.MTU4096 {
		return 0
	}
	return 128 << m
}

// readNetdev reads class/net/<name> under root. A missing entry is reported as absent (the
// netdevs of emulated ports exist only in the emulator); other failures name the file and
// keep the errno.
func readNetdev(root, name string) netdevStatus {
	if root == "" {
		root = "/sys"
	}
	n := netdevStatus{Name: name}
	dir := filepath.Join(root, "class/net", name)
	if strings.ContainsRune(name, '/') || name == "." || name == ".." {
		n.Error = fmt.Sprintf("netdev name %q: %v", name, errors.New("invalid"))
		return n
	}
	if _, err := os.Stat(dir); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			n.Error = fmt.Sprintf("stat %s: %v", dir, err)
		}
		return n
	}
	n.Present = true
	var errs []string
	read := func(file string) (string, bool) {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			// carrier of an administratively down interface reads EINVAL: not an error.
			if !(file == "carrier" && errors.Is(err, unix.EINVAL)) {
				errs = append(errs, fmt.Sprintf("read %s: %v", file, err))
			}
			return "", false
		}
		return strings.TrimSpace(string(b)), true
	}
	if v, ok := read("operstate"); ok {
		n.OperState = v
	}
	if v, ok := read("carrier"); ok {
		if c, err := strconv.Atoi(v); err == nil {
			n.Carrier = &c
		}
	}
	if v, ok := read("carrier_down_count"); ok {
		if c, err := strconv.ParseUint(v, 10, 64); err == nil {
			n.CarrierDownCount = &c
		} else {
			errs = append(errs, fmt.Sprintf("parse carrier_down_count %q: %v", v, err))
		}
	}
	if v, ok := read("mtu"); ok {
		n.MTU, _ = strconv.Atoi(v)
	}
	n.Error = strings.Join(errs, "; ")
	return n
}

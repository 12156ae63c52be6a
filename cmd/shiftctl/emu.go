package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5/emu/emusysfs"
)

const emuUsage = `  emu up -root DIR [-identity shift|connectx] NAME=IP[@NETDEV] ...
         emulated ConnectX devices for unmodified verbs programs through libmlx5-shift:
         writes their sysfs tree under DIR and the /dev/infiniband/uverbsN stand-ins (root),
         then prints the environment that points libibverbs at them (as emu env)
  emu env -root DIR [-plugin DIR]      print that environment again
  emu down -root DIR                   remove the tree and the stand-ins
    -root DIR       the sysfs tree (SYSFS_PATH for the programs)
    -identity ID    shift (modalias shift:emu, default) or connectx (a ConnectX-6 PCI
                    identity, so programs that link libmlx5 see one; needs the preload)
    -plugin DIR     where libmlx5-shift-rdmav34.so and libmlx5-shift-preload.so are
                    (default: the directory of shiftctl)
    NAME=IP         a device NAME whose NIC sends RoCEv2 from IP (UDP port 4791), on
                    interface NETDEV (default: the one holding IP)`

func emuMain(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{fmt.Errorf("emu: want up, env or down\n%s", emuUsage)}
	}
	fs := flag.NewFlagSet("emu "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	root := fs.String("root", "", "")
	identity := fs.String("identity", string(emusysfs.Shift), "")
	plugin := fs.String("plugin", "", "")
	sub := args[0]
	if sub == "-h" || sub == "--help" || sub == "help" {
		_, err := fmt.Fprintln(stdout, emuUsage)
		return err
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, err = fmt.Fprintln(stdout, emuUsage)
			return err
		}
		return usageError{fmt.Errorf("%w\n%s", err, emuUsage)}
	}
	if *root == "" {
		return usageError{fmt.Errorf("emu %s: -root is required: %w\n%s", sub, unix.EINVAL, emuUsage)}
	}
	abs, err := filepath.Abs(*root)
	if err != nil {
		return err
	}
	switch sub {
	case "up":
		devs, err := parseEmuDevices(fs.Args(), emusysfs.Identity(*identity))
		if err != nil {
			return usageError{fmt.Errorf("emu up: %w\n%s", err, emuUsage)}
		}
		t, err := emusysfs.Create(abs, devs, emusysfs.Options{})
		if err != nil {
			return fmt.Errorf("emu up: %w", err)
		}
		for _, d := range t.Devices {
			fmt.Fprintf(stdout, "# %s: %s at %v (%s) identity %s\n", d.Name, t.Uverbs[d.Name], d.IP, orNone(d.Netdev), d.Identity)
		}
		return printEmuEnv(stdout, abs, *plugin)
	case "env":
		if fs.NArg() != 0 {
			return usageError{fmt.Errorf("emu env: unexpected argument %q", fs.Arg(0))}
		}
		if _, err := emusysfs.Load(abs); err != nil {
			return err
		}
		return printEmuEnv(stdout, abs, *plugin)
	case "down":
		if fs.NArg() != 0 {
			return usageError{fmt.Errorf("emu down: unexpected argument %q", fs.Arg(0))}
		}
		t, err := emusysfs.Load(abs)
		if err != nil {
			return err
		}
		return t.Remove()
	}
	return usageError{fmt.Errorf("emu %q: want up, env or down: %w\n%s", sub, unix.EINVAL, emuUsage)}
}

func orNone(s string) string {
	if s == "" {
		return "no netdev"
	}
	return s
}

// parseEmuDevices reads NAME=IP[@NETDEV] arguments.
func parseEmuDevices(args []string, id emusysfs.Identity) ([]emusysfs.Device, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("no devices: give NAME=IP for each: %w", unix.EINVAL)
	}
	var out []emusysfs.Device
	for _, a := range args {
		name, rest, ok := strings.Cut(a, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("device %q: want NAME=IP[@NETDEV]: %w", a, unix.EINVAL)
		}
		ipStr, netdev, _ := strings.Cut(rest, "@")
		ip, err := netip.ParseAddr(ipStr)
		if err != nil {
			return nil, fmt.Errorf("device %s: address %q: %w", name, ipStr, unix.EINVAL)
		}
		if netdev == "" {
			netdev = interfaceHolding(ip)
		}
		out = append(out, emusysfs.Device{Name: name, IP: ip.Unmap(), Netdev: netdev, Identity: id})
	}
	return out, nil
}

// interfaceHolding is the interface that holds ip in this network namespace ("lo" for an
// address of 127.0.0.0/8 no interface names; "" if none).
func interfaceHolding(ip netip.Addr) string {
	ifs, _ := net.Interfaces()
	for _, ifi := range ifs {
		addrs, _ := ifi.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if x, ok := netip.AddrFromSlice(n.IP); ok && x.Unmap() == ip.Unmap() {
					return ifi.Name
				}
			}
		}
	}
	if ip.IsLoopback() {
		return "lo"
	}
	return ""
}

// printEmuEnv prints the shell lines that run unmodified programs on the tree: libibverbs
// scans SYSFS_PATH, loads the plugin first (RDMAV_DRIVERS) and, with the preload object,
// lets the plugin make completion channels and register ahead of a libmlx5 the program links.
func printEmuEnv(w io.Writer, root, pluginDir string) error {
	if pluginDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		pluginDir = filepath.Dir(exe)
	}
	pluginDir, err := filepath.Abs(pluginDir)
	if err != nil {
		return err
	}
	lib := filepath.Join(pluginDir, "libmlx5-shift-rdmav34.so")
	if _, err := os.Stat(lib); err != nil {
		fmt.Fprintf(w, "# %s is missing: build it with 'make plugin' (or give -plugin DIR)\n", lib)
	}
	fmt.Fprintf(w, "export SYSFS_PATH=%s\n", root)
	fmt.Fprintf(w, "export RDMAV_DRIVERS=%s\n", filepath.Join(pluginDir, "libmlx5-shift"))
	fmt.Fprintf(w, "export LD_PRELOAD=%s\n", filepath.Join(pluginDir, "libmlx5-shift-preload.so"))
	return nil
}

package vmtest

import (
	"fmt"
	"path"
	"strings"
)

// Guest line protocol, written by /init to the second serial port (ttyS1):
//
//	@@VMTEST boot <uptime>
//	@@VMTEST begin <step> <uptime>
//	... everything the step writes to stdout and stderr ...
//	@@VMTEST end <step> <exit-code> <uptime>
//	@@VMTEST done <uptime>
//
// <uptime> is the guest's /proc/uptime in seconds. Setup steps are named "setup:...".
const marker = "@@VMTEST "

// GuestEnv is the environment every guest step starts with, besides PATH, HOME and TMPDIR:
// SHIFT_VM_GUEST=1 tells a test it runs inside this harness, where an RDMA device is
// guaranteed (so "no device" is a failure there, not a skip), and SHIFT_UVERBS_DEVICE names
// the uverbs character device of rxe0.
var GuestEnv = []string{"SHIFT_VM_GUEST=1", "SHIFT_UVERBS_DEVICE=/dev/infiniband/uverbs0"}

// Guest network: rxe0 runs over dummy0 with this address, so RoCE GID 1 is an IPv4 GID.
const (
	guestNetdev = "dummy0"
	guestAddr   = "10.9.9.1/24"
	guestRDMA   = "rxe0"
)

// shellQuote quotes s for a POSIX shell as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}

// guestStep is one line of the generated /init: a named command.
type guestStep struct {
	name string
	argv []string
}

// initScript writes the guest's /init: mount the pseudo file systems, load the modules in
// order, create rxe0 over dummy0, then (only if all of that worked) run the steps, and power
// off. Closing the protocol port before poweroff waits for the UART to drain, so the last
// lines are not lost.
func initScript(kver string, modules []string, modPaths map[string]string, steps []guestStep) string {
	var b strings.Builder
	b.WriteString(`#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/bin:/usr/sbin:/bin:/sbin HOME=/tmp TMPDIR=/tmp
`)
	for _, kv := range GuestEnv {
		fmt.Fprintf(&b, "export %s\n", shellQuote(kv))
	}
	b.WriteString(`mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec 3>/dev/ttyS1 || { echo "vmtest: cannot open /dev/ttyS1"; poweroff -f; }
up() { cut -d' ' -f1 /proc/uptime; }
say() { echo "` + marker + `$*" >&3; }
step() { n=$1; shift; say begin "$n" "$(up)"; "$@" </dev/null >&3 2>&1; rc=$?; say end "$n" "$rc" "$(up)"; return $rc; }
say boot "$(up)"
ok=1
`)
	setup := []guestStep{}
	for _, m := range modules {
		setup = append(setup, guestStep{"insmod:" + m, []string{"insmod", path.Join("/lib/modules", kver, modPaths[m])}})
	}
	setup = append(setup,
		guestStep{"lo", []string{"ip", "link", "set", "lo", "up"}},
		guestStep{"addr", []string{"ip", "addr", "add", guestAddr, "dev", guestNetdev}},
		guestStep{"link", []string{"ip", "link", "set", guestNetdev, "up"}},
		guestStep{"rxe", []string{"rdma", "link", "add", guestRDMA, "type", "rxe", "netdev", guestNetdev}},
		guestStep{"uverbs0", []string{"test", "-c", "/dev/infiniband/uverbs0"}},
		guestStep{"device", []string{"sh", "-c", "for f in node_type node_guid ports/1/state ports/1/link_layer ports/1/gids/1; do echo " + guestRDMA + " $f: $(cat /sys/class/infiniband/" + guestRDMA + "/$f); done"}},
	)
	for _, s := range setup {
		fmt.Fprintf(&b, "[ $ok = 1 ] && { step %s %s || ok=0; }\n", setupPrefix+s.name, shellWords(s.argv))
	}
	b.WriteString("if [ $ok = 1 ]; then\ncd /tmp\n")
	for _, s := range steps {
		fmt.Fprintf(&b, "step %s %s\n", s.name, shellWords(s.argv))
	}
	b.WriteString(`fi
say done "$(up)"
exec 3>&-
poweroff -f
`)
	return b.String()
}

package verbs_test

import (
	"fmt"
	"net"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/provider/verbs"
)

func TestErrno(t *testing.T) {
	for _, c := range []struct {
		err  error
		want unix.Errno
	}{
		{nil, 0},
		{&verbs.WRError{Op: "post_send", Err: verbs.ErrSQFull}, unix.ENOMEM},
		{fmt.Errorf("x: %w", verbs.ErrInlineTooLarge), unix.ENOMEM},
		{&verbs.WRError{Op: "post_send", Err: verbs.ErrQPState}, unix.EINVAL},
		{fmt.Errorf("modify: %w", unix.EPERM), unix.EPERM},
		{verbs.ErrNotSupported, unix.EOPNOTSUPP},
		{fmt.Errorf("plain"), unix.EIO},
	} {
		if got := verbs.Errno(c.err); got != c.want {
			t.Errorf("Errno(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func gid(ip string) [16]byte {
	var g [16]byte
	copy(g[:], net.ParseIP(ip).To16())
	return g
}

func TestPreferredGID(t *testing.T) {
	ll := [16]byte{0xfe, 0x80, 15: 1}
	gs := []verbs.GID{
		{Index: 0, Port: 1, GID: ll},                             // RoCE v1 link-local
		{Index: 1, Port: 1, GID: ll, RoCEv2: true},               // RoCE v2 link-local
		{Index: 2, Port: 1, GID: gid("10.0.0.7")},                // RoCE v1 IPv4
		{Index: 3, Port: 1, GID: gid("10.0.0.7"), RoCEv2: true},  // RoCE v2 IPv4: perftest's pick
		{Index: 0, Port: 2, GID: gid("10.0.1.7"), RoCEv2: false}, // another port
	}
	if g, ok := verbs.PreferredGID(gs, 1); !ok || g.Index != 3 {
		t.Errorf("PreferredGID(port 1) = %+v, %v; want index 3", g, ok)
	}
	if g, ok := verbs.PreferredGID(gs[:2], 1); !ok || g.Index != 1 {
		t.Errorf("without an IPv4 GID: %+v, %v; want the RoCE v2 index 1", g, ok)
	}
	if g, ok := verbs.PreferredGID(gs, 2); !ok || g.Index != 0 {
		t.Errorf("port 2: %+v, %v; want index 0", g, ok)
	}
	if _, ok := verbs.PreferredGID(gs, 3); ok {
		t.Error("port 3 has no GIDs but one was found")
	}
	if g, ok := verbs.FindGIDByIP(gs, 1, net.ParseIP("10.0.0.7")); !ok || g.Index != 3 {
		t.Errorf("FindGIDByIP = %+v, %v; want index 3", g, ok)
	}
}

func TestSmallHelpers(t *testing.T) {
	if got := verbs.MTUBytes(verbs.MTU4096); got != 4096 {
		t.Errorf("MTUBytes(MTU4096) = %d", got)
	}
	if got := verbs.MTUBytes(0); got != 0 {
		t.Errorf("MTUBytes(0) = %d", got)
	}
	if got := (verbs.DeviceAttr{FWVer: 20<<32 | 31<<16 | 1014}).FWVerString(); got != "20.31.1014" {
		t.Errorf("FWVerString = %q", got)
	}
	if !verbs.WRSendWithImm.TwoSided() || verbs.WRRDMAWrite.TwoSided() || !verbs.WRAtomicFetchAdd.Atomic() {
		t.Error("opcode classes wrong")
	}
	if verbs.QPStateRTS.String() != "RTS" || verbs.WCRetryExcErr.Name() != "RETRY_EXC_ERR" ||
		verbs.WCWRFlushErr.String() != "Work Request Flushed Error" {
		t.Error("names wrong")
	}
}

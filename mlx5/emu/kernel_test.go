package emu_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/emutest"
	"github.com/shift-rdma/shift/uverbs"
)

func newCluster(t *testing.T, cfg emu.ClusterConfig) *emu.Cluster {
	t.Helper()
	return emutest.NewCluster(t, cfg)
}

func wantErrno(t *testing.T, what string, err error, want unix.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want %v", what, err, want)
	}
}

func TestQueries(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 1, NICs: 2})
	dev := c.Hosts[0].Devices[1]
	x := emutest.Open(t, dev)

	d, err := uverbs.QueryDevice(x.File)
	if err != nil {
		t.Fatal(err)
	}
	if d.Base.Vendor_id != 0x02c9 || d.Base.Vendor_part_id != 4123 || d.Base.Phys_port_cnt != 1 || !guidBytes(d.Base.Node_guid, dev.NodeGUID()) {
		t.Errorf("query device: %+v", d.Base)
	}
	if d.Base.Max_qp_rd_atom != 16 || d.Base.Max_qp_wr != 1<<15 || d.Base.Atomic_cap != 1 {
		t.Errorf("caps: %+v", d.Base)
	}
	legacy, err := uverbs.QueryDeviceLegacy(x.File)
	if err != nil || legacy != d.Base {
		t.Errorf("legacy query device %v: %+v", err, legacy)
	}
	p, err := uverbs.QueryPort(x.File, uverbs.DriverIDMLX5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Legacy_resp.State != uverbs.PortActive || p.Legacy_resp.Active_mtu != uverbs.MTU4096 || p.Legacy_resp.Link_layer != uverbs.LinkLayerEthernet {
		t.Errorf("query port: %+v", p.Legacy_resp)
	}
	pw, err := uverbs.QueryPortWrite(x.File, 1)
	if err != nil || pw != p.Legacy_resp {
		t.Errorf("query port (write) %v: %+v", err, pw)
	}
	_, err = uverbs.QueryPort(x.File, uverbs.DriverIDMLX5, 2)
	wantErrno(t, "query port 2", err, unix.EINVAL)
	_, err = uverbs.QueryPortWrite(x.File, 0)
	wantErrno(t, "query port 0 (write)", err, unix.EINVAL)

	gids, err := uverbs.QueryGIDTable(x.File, uverbs.DriverIDMLX5, 16)
	if err != nil {
		t.Fatal(err)
	}
	if len(gids) != 1 {
		t.Fatalf("gid table: %+v", gids)
	}
	want := emu.PortAddr(0, 1, 1).As16() // ::ffff:10.1.0.1
	got := dev.Ports()[0].GID()
	if got != want || gids[0].Gid_type != uverbs.GIDTypeRoCEv2 || gids[0].Port_num != 1 || gids[0].Gid_index != 0 {
		t.Errorf("gid %x type %d, want %x RoCEv2", got, gids[0].Gid_type, want)
	}
	if a := netip.AddrFrom16(got); !a.Is4In6() || a.Unmap() != netip.MustParseAddr("10.1.0.1") {
		t.Errorf("GID %v is not ::ffff:10.1.0.1", a)
	}
	e, err := uverbs.QueryGIDEntry(x.File, uverbs.DriverIDMLX5, 1, 0)
	if err != nil || e != gids[0] {
		t.Errorf("query gid entry 1/0: %v %+v", err, e)
	}
	_, err = uverbs.QueryGIDEntry(x.File, uverbs.DriverIDMLX5, 1, 1)
	wantErrno(t, "empty gid entry", err, unix.ENODATA)
	_, err = uverbs.QueryGIDEntry(x.File, uverbs.DriverIDMLX5, 2, 0)
	wantErrno(t, "gid entry of port 2", err, unix.EINVAL)
	if x.Resp.NumPorts != 1 || x.Resp.BfRegSize != 512 || x.Resp.TotBfregs != emutest.TotalBfregs || x.Resp.CQEVersion != 1 {
		t.Errorf("alloc_ucontext response: %+v", x.Resp)
	}
}

func TestPDAndMR(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 1})
	x := emutest.Open(t, c.Hosts[0].Devices[0])
	buf := emutest.Mem(t, 3*4096)
	reg := func(start, length, iova uint64, pd, access uint32) (uverbs.MR, error) {
		return uverbs.RegMR(x.File, uverbs.RegMRRequest{Start: start, Length: length, HCAVA: iova, PD: pd, Access: access}, nil, nil)
	}
	a := uverbs.Addr(buf)
	mr, err := reg(a+100, 5000, a+100, x.PD, emutest.AllAccess)
	if err != nil {
		t.Fatal(err)
	}
	if mr.LKey == 0 || mr.RKey == 0 {
		t.Errorf("keys %#x/%#x", mr.LKey, mr.RKey)
	}
	_, err = reg(a, 4096, a+8, x.PD, 0)
	wantErrno(t, "start and iova in different page offsets", err, unix.EINVAL)
	_, err = reg(a, 4096, a, x.PD, uverbs.AccessRemoteWrite)
	wantErrno(t, "remote write without local write", err, unix.EINVAL)
	_, err = reg(a, 4096, a, x.PD, 1<<12)
	wantErrno(t, "unknown access bit", err, unix.EINVAL)
	_, err = reg(a, 4096, a, x.PD+77, 0)
	wantErrno(t, "bad pd handle", err, unix.ENOENT)
	_, err = reg(a, 0, a, x.PD, 0)
	wantErrno(t, "zero length", err, unix.EINVAL)
	// A page that is not mapped: unmap the middle page of a fresh region.
	hole := emutest.Mem(t, 3*4096)
	if _, _, e := unix.Syscall(unix.SYS_MUNMAP, uintptr(uverbs.Addr(hole)+4096), 4096, 0); e != 0 {
		t.Fatal(e)
	}
	_, err = reg(uverbs.Addr(hole), 3*4096, uverbs.Addr(hole), x.PD, 0)
	wantErrno(t, "range with an unmapped page", err, unix.EFAULT)

	wantErrno(t, "dealloc pd with an MR", uverbs.DeallocPD(x.File, uverbs.DriverIDMLX5, x.PD), unix.EBUSY)
	wantErrno(t, "dealloc pd with an MR (write)", uverbs.DeallocPDWrite(x.File, x.PD), unix.EBUSY)
	wantErrno(t, "dereg mr unknown handle", uverbs.DeregMR(x.File, uverbs.DriverIDMLX5, 999), unix.ENOENT)
	wantErrno(t, "dereg mr with a PD handle", uverbs.DeregMRWrite(x.File, x.PD), unix.EINVAL)
	if err := uverbs.DeregMR(x.File, uverbs.DriverIDMLX5, mr.Handle); err != nil {
		t.Fatal(err)
	}
	if _, ok := x.Dev.NIC().LookupMR(mr.LKey); ok {
		t.Errorf("lkey %#x still known to the NIC after dereg", mr.LKey)
	}
	if err := uverbs.DeallocPD(x.File, uverbs.DriverIDMLX5, x.PD); err != nil {
		t.Fatalf("dealloc pd after dereg: %v", err)
	}
	wantErrno(t, "dealloc pd twice", uverbs.DeallocPDWrite(x.File, x.PD), unix.ENOENT)
}

func TestCommandsNeedContext(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 1})
	f, err := c.Hosts[0].Devices[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = uverbs.AllocPD(f, nil, nil)
	wantErrno(t, "alloc pd without context", err, unix.EINVAL)
	_, err = uverbs.QueryPort(f, uverbs.DriverIDMLX5, 1)
	wantErrno(t, "query port without context", err, unix.EINVAL)
	_, err = f.Mmap(0, 4096)
	wantErrno(t, "mmap without context", err, unix.EINVAL)
	// A v1 request is 8 bytes; anything between 8 and a v2 request is refused.
	_, err = uverbs.GetContextWrite(f, make([]byte, 12), make([]byte, mlx5.AllocUcontextRespSize))
	wantErrno(t, "short alloc_ucontext request", err, unix.EINVAL)
	req := mlx5.AllocUcontextReqV2{TotalNumBfregs: 4, NumLowLatencyBfregs: 4}
	in := make([]byte, mlx5.AllocUcontextReqV2Size)
	req.Put(in)
	_, err = uverbs.GetContextWrite(f, in, make([]byte, mlx5.AllocUcontextRespSize))
	wantErrno(t, "all bfregs low latency", err, unix.EINVAL)
	req.NumLowLatencyBfregs = 1
	req.Put(in)
	out := make([]byte, mlx5.AllocUcontextRespSize)
	ctx, err := uverbs.GetContextWrite(f, in, out)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ctx.AsyncFD)
	if ctx.NumCompVectors == 0 || ctx.AsyncFD <= 0 {
		t.Errorf("context %+v", ctx)
	}
	_, err = uverbs.GetContextWrite(f, in, out)
	wantErrno(t, "second get_context", err, unix.EINVAL)
	_, err = f.Mmap(mlx5.MmapOffset(mlx5.MmapRegularPage, 2, 4096), 4096)
	wantErrno(t, "mmap beyond the context's UAR pages", err, unix.EINVAL)
	_, err = f.Mmap(mlx5.MmapOffset(mlx5.MmapRegularPage, 0, 4096), 8192)
	wantErrno(t, "mmap two pages", err, unix.EINVAL)
	m, err := f.Mmap(mlx5.MmapOffset(mlx5.MmapRegularPage, 1, 4096), 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Munmap(m); err != nil {
		t.Error(err)
	}
	wantErrno(t, "munmap twice", f.Munmap(m), unix.EINVAL)
	wantErrno(t, "unknown write command", uverbs.Write(f, uverbs.CmdCreateSRQ, make([]byte, 8), nil, nil, nil), unix.EOPNOTSUPP)
	_, err = uverbs.QueryPort(f, uverbs.DriverIDRXE, 1)
	wantErrno(t, "ioctl with the rxe driver id", err, unix.EINVAL)
	un := uverbs.NewIoctl(uverbs.ObjectDevice, 200, uverbs.DriverIDMLX5)
	wantErrno(t, "ioctl of an unknown method", un.Exec(f, "ioctl DEVICE/200"), unix.EPROTONOSUPPORT)
	mand := uverbs.NewIoctl(uverbs.ObjectDevice, uverbs.MethodQueryPort, uverbs.DriverIDMLX5)
	mand.InU64(uverbs.AttrQueryPortPortNum, 1)
	mand.Out(uverbs.AttrQueryPortResp, make([]byte, 64))
	mand.InU32(0x0fff, 1)
	wantErrno(t, "ioctl with an unknown mandatory attribute", mand.Exec(f, "ioctl QUERY_PORT"), unix.EPROTONOSUPPORT)
	short := uverbs.NewIoctl(uverbs.ObjectDevice, uverbs.MethodQueryPort, uverbs.DriverIDMLX5)
	short.In(uverbs.AttrQueryPortPortNum, []byte{1})
	short.Out(uverbs.AttrQueryPortResp, make([]byte, 64))
	wantErrno(t, "ioctl QUERY_PORT with a 1-byte port attribute", short.Exec(f, "ioctl QUERY_PORT"), unix.EINVAL)
}

// A port on a 1500-byte netdev runs RoCE at MTU 1024 (iboe_get_mtu); a path MTU above it is
// refused.
func TestPathMTUFollowsNetdev(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 2, NetdevMTU: 1500})
	x := emutest.Open(t, c.Hosts[0].Devices[0])
	p, err := uverbs.QueryPort(x.File, uverbs.DriverIDMLX5, 1)
	if err != nil || p.Legacy_resp.Active_mtu != uverbs.MTU1024 || p.Legacy_resp.Max_mtu != uverbs.MTU4096 {
		t.Fatalf("query port: %v active %d max %d, want 1024 (3) and 4096 (5)", err, p.Legacy_resp.Active_mtu, p.Legacy_resp.Max_mtu)
	}
	cq := x.CreateCQ(16, -1)
	qp := x.CreateQP(cq, cq, emutest.DefaultSize)
	init := uverbs.QPAttr{State: uverbs.QPStateInit, Port: 1}
	if err := qp.Modify(&init, uverbs.QPAttrState|uverbs.QPAttrPkeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	rtr := uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: uverbs.MTU2048, DestQPN: 0x123, MaxDestRdAtomic: 1,
		AV: uverbs.Path{DGID: c.Hosts[1].Devices[0].Ports()[0].GID(), IsGlobal: true, Port: 1}}
	mask := uint32(uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN |
		uverbs.QPAttrRQPSN | uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer)
	wantErrno(t, "path MTU 2048 on a 1024 port", qp.Modify(&rtr, mask), unix.EINVAL)
	rtr.PathMTU = uverbs.MTU1024
	if err := qp.Modify(&rtr, mask); err != nil {
		t.Errorf("path MTU 1024: %v", err)
	}
}

// TestAllocUcontextLengths: mlx5_ib takes a v0 request of exactly 8 bytes or a v2 request of
// at least offsetof(max_cqe_version) = 16 bytes; libmlx5 retries with 24 and then 16 bytes
// on kernels that refuse what they do not know (mlx5_cmd_get_context).
func TestAllocUcontextLengths(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 1})
	for _, n := range []int{4, 8, 12, 15, 16, 24, 32} {
		f, err := c.Hosts[0].Devices[0].Open()
		if err != nil {
			t.Fatal(err)
		}
		req := mlx5.AllocUcontextReqV2{TotalNumBfregs: 4, NumLowLatencyBfregs: 1}
		in := make([]byte, mlx5.AllocUcontextReqV2Size)
		req.Put(in)
		ctx, err := uverbs.GetContextWrite(f, in[:n], make([]byte, mlx5.AllocUcontextRespSize))
		if n == 8 || n >= 16 {
			if err != nil {
				t.Errorf("%d-byte request: %v", n, err)
			} else {
				unix.Close(ctx.AsyncFD)
			}
		} else {
			wantErrno(t, fmt.Sprintf("%d-byte request", n), err, unix.EINVAL)
		}
		f.Close()
	}
}

// guidBytes reports whether the __be64 field f holds guid: its memory bytes big-endian, as
// the sysfs node_guid prints them.
func guidBytes(f, guid uint64) bool {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], f)
	return binary.BigEndian.Uint64(b[:]) == guid
}

package emu_test

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/emutest"
	"github.com/shift-rdma/shift/mlx5/emu/nic"
	"github.com/shift-rdma/shift/uverbs"
)

// quiet is how long the tests below watch for something a hung or dead device must not do.
// It proves nothing by itself: a healthy device completes the same WRITE in well under it
// (TestDeviceKill and TestDeviceHang check that first), so a missing CQE is the device's.
const quiet = 50 * time.Millisecond

// A killed device raises DEVICE_FATAL then PORT_ERR on the async fd, reports its port down,
// executes nothing more and writes no CQE, fails the commands that create or change objects
// with EIO (as mlx5_cmd_exec in internal error), and still lets everything be destroyed.
func TestDeviceKill(t *testing.T) {
	c, p, mb, write := writingPair(t, 21, "WRITE before the kill")

	dev := c.Hosts[0].Devices[0].NIC()
	dev.Kill()
	if h := dev.Health(); h != nic.Dead {
		t.Fatalf("health %v after Kill", h)
	}
	if ev := readAsync(t, p.A.AsyncFD); ev.Type != uverbs.EventDeviceFatal {
		t.Errorf("first event %+v, want DEVICE_FATAL", ev)
	}
	if ev := readAsync(t, p.A.AsyncFD); ev.Type != uverbs.EventPortErr || ev.Element != 1 {
		t.Errorf("second event %+v, want PORT_ERR on port 1", ev)
	}
	if pr, err := uverbs.QueryPort(p.A.File, uverbs.DriverIDMLX5, 1); err != nil || pr.Legacy_resp.State != uverbs.PortDown {
		t.Errorf("port after the kill: %v, state %d", err, pr.Legacy_resp.State)
	}
	// The link coming back does not bring a dead device's port up.
	c.Endpoint(0, 0, 1).SetLinkUp(false)
	c.Endpoint(0, 0, 1).SetLinkUp(true)
	if dev.Port(1).Active() {
		t.Error("a dead device's port followed its link up")
	}
	if ok, _ := uverbs.WaitReadable(p.B.AsyncFD, 0); ok {
		t.Error("the peer's device raised an event")
	}

	clear(mb.Buf)
	p.QA.PostRing(t, write)
	time.Sleep(quiet)
	if !p.SCQA.Empty() {
		t.Error("a dead device wrote a CQE")
	}
	if mb.Buf[0] != 0 || mb.Buf[511] != 0 {
		t.Error("a dead device's WRITE reached the peer")
	}
	// mlx5_cmd_exec in internal error: the transitions fail with EIO, the moves to ERR and
	// RESET succeed (mlx5_internal_err_ret_value fakes 2ERR_QP and 2RST_QP), and a QP in
	// ERR writes no flush there.
	if err := p.QA.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS}, uverbs.QPAttrState); !errors.Is(err, unix.EIO) {
		t.Errorf("modify qp RTS→RTS on a dead device: %v, want EIO", err)
	}
	if err := p.QA.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Errorf("modify qp to ERR on a dead device: %v, want success", err)
	}
	time.Sleep(quiet)
	if !p.SCQA.Empty() {
		t.Error("a dead device flushed the QP it moved to ERR")
	}
	if err := p.QA.Modify(&uverbs.QPAttr{State: uverbs.QPStateReset}, uverbs.QPAttrState); err != nil {
		t.Errorf("modify qp to RESET on a dead device: %v, want success", err)
	}
	// Closing the context (t.Cleanup) destroys every object: destroy commands succeed.
}

// A hung device stops silently: no CQE, no packet, no event, its port stays up and commands
// are answered.
func TestDeviceHang(t *testing.T) {
	c, p, mb, write := writingPair(t, 22, "WRITE before the hang")

	dev := c.Hosts[0].Devices[0].NIC()
	dev.Hang()
	clear(mb.Buf)
	tx := c.Endpoint(0, 0, 1).Stats().TxPackets
	p.QA.PostRing(t, write)
	time.Sleep(quiet)
	if !p.SCQA.Empty() {
		t.Error("a hung device wrote a CQE")
	}
	if mb.Buf[0] != 0 || mb.Buf[511] != 0 {
		t.Error("a hung device's WRITE reached the peer")
	}
	if n := c.Endpoint(0, 0, 1).Stats().TxPackets; n != tx {
		t.Errorf("a hung device sent %d packets", n-tx)
	}
	if ok, _ := uverbs.WaitReadable(p.A.AsyncFD, 0); ok {
		t.Error("a hung device raised an async event")
	}
	if pr, err := uverbs.QueryPort(p.A.File, uverbs.DriverIDMLX5, 1); err != nil || pr.Legacy_resp.State != uverbs.PortActive {
		t.Errorf("port of a hung device: %v, state %d, want ACTIVE", err, pr.Legacy_resp.State)
	}
	if err := p.QA.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Errorf("modify qp on a hung device: %v", err)
	}
	// Killing it now reports the failure it hid.
	dev.Kill()
	if ev := readAsync(t, p.A.AsyncFD); ev.Type != uverbs.EventDeviceFatal {
		t.Errorf("event %+v after killing a hung device, want DEVICE_FATAL", ev)
	}
}

// writingPair connects a QP pair, registers an MR on each side and runs one WRITE of 512
// bytes filled from seed from A to B to completion; it returns the cluster, the pair, B's MR
// and that WRITE.
func writingPair(t *testing.T, seed uint64, what string) (*emu.Cluster, *emutest.Pair, *emutest.MR, emutest.WR) {
	t.Helper()
	c, p := pair(t, emutest.DefaultConn)
	ma, mb := p.A.RegMR(4096, emutest.AllAccess), p.B.RegMR(4096, emutest.AllAccess)
	fill(seed, ma.Buf)
	write := emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf[:512])}, RemoteAddr: mb.Addr(), RKey: mb.RKey}
	p.QA.PostRing(t, write)
	wantWC(t, what, p.SCQA.Wait(t, wait), mlx5.WCSuccess, mlx5.WCRDMAWrite, 0)
	return c, p, mb, write
}

package emutest

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/uverbs"
)

// Ctx is an open context on an emulated device, set up as libmlx5's mlx5_init_context does.
type Ctx struct {
	T       testing.TB
	Dev     *emu.Device
	File    uverbs.File
	AsyncFD int
	Resp    mlx5.AllocUcontextResp
	Layout  mlx5.UARLayout
	UARs    [][]byte // mapped UAR pages, mmap index order
	PD      uint32
	nextUH  uint64
	mems    [][]byte
}

// Mem returns n bytes of page-aligned memory that stays mapped until the context is closed.
func (c *Ctx) Mem(n int) []byte {
	c.T.Helper()
	b := mmap(c.T, n)
	c.mems = append(c.mems, b)
	return b[:n]
}

// TotalBfregs and LowLatencyBfregs are what the fixture asks for in alloc_ucontext (libmlx5's
// defaults are 16 and 4; more bfregs allow more QPs per context here, see emu.allocBfreg).
const (
	TotalBfregs      = 32
	LowLatencyBfregs = 4
)

// Open opens dev, gets a context through the ioctl path (plus the async event fd), maps
// every UAR page and allocates a PD. Everything is released when the test ends.
func Open(t testing.TB, dev *emu.Device) *Ctx {
	t.Helper()
	f, err := dev.Open()
	if err != nil {
		t.Fatalf("open %s: %v", dev.Name(), err)
	}
	c := &Ctx{T: t, Dev: dev, File: f, AsyncFD: -1, nextUH: 0x1000}
	t.Cleanup(c.Close)
	req := mlx5.AllocUcontextReqV2{TotalNumBfregs: TotalBfregs, NumLowLatencyBfregs: LowLatencyBfregs,
		MaxCQEVersion: 1, LibCaps: mlx5.LibCap4KUAR}
	in := make([]byte, mlx5.AllocUcontextReqV2Size)
	req.Put(in)
	out := make([]byte, mlx5.AllocUcontextRespSize)
	ctx, err := uverbs.GetContext(f, uverbs.DriverIDMLX5, in, out)
	if err != nil {
		t.Fatalf("get context: %v", err)
	}
	c.AsyncFD = ctx.AsyncFD
	if c.Resp, err = mlx5.DecodeAllocUcontextResp(out); err != nil {
		t.Fatalf("alloc_ucontext response: %v", err)
	}
	if c.Layout, err = mlx5.LayoutFromResp(&c.Resp, &req, os.Getpagesize()); err != nil {
		t.Fatalf("UAR layout: %v", err)
	}
	for i := range c.Layout.NumSysPages() {
		m, err := f.Mmap(mlx5.MmapOffset(mlx5.MmapRegularPage, i, os.Getpagesize()), os.Getpagesize())
		if err != nil {
			t.Fatalf("mmap UAR page %d: %v", i, err)
		}
		c.UARs = append(c.UARs, m)
	}
	if c.PD, err = uverbs.AllocPD(f, nil, make([]byte, 8)); err != nil {
		t.Fatalf("alloc pd: %v", err)
	}
	return c
}

// Close closes the file and the async fd (idempotent).
func (c *Ctx) Close() {
	if c.File != nil {
		_ = c.File.Close()
		c.File = nil
	}
	if c.AsyncFD >= 0 {
		_ = unix.Close(c.AsyncFD)
		c.AsyncFD = -1
	}
	if c.Dev != nil && release(c.Dev, c.mems) {
		c.mems = nil
		return
	}
	c.quiesce()
	for _, b := range c.mems {
		_ = unix.Munmap(b)
	}
	c.mems = nil
}

// quiesce waits until the device's doorbell watcher has completed two more passes, so a
// doorbell it picked up before the objects were destroyed has been handled and it no longer
// holds their memory. (nic's destroy does not yet wait for the watcher itself; a real device
// finishes with an object before destroy returns.)
func (c *Ctx) quiesce() {
	if c.Dev == nil || c.Dev.NIC() == nil {
		return
	}
	n := c.Dev.NIC()
	start := n.Stats().Passes
	deadline := time.Now().Add(5 * time.Second)
	for n.Stats().Passes < start+2 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Microsecond)
	}
}

func (c *Ctx) userHandle() uint64 {
	c.nextUH++
	return c.nextUH
}

// MR is a registered buffer.
type MR struct {
	Buf []byte
	uverbs.MR
}

// Addr is the buffer's address.
func (m *MR) Addr() uint64 { return uverbs.Addr(m.Buf) }

// RegMR registers n bytes of fresh memory with the given access flags.
func (c *Ctx) RegMR(n int, access uint32) *MR {
	c.T.Helper()
	b := c.Mem(n)
	mr, err := uverbs.RegMR(c.File, uverbs.RegMRRequest{Start: uverbs.Addr(b), Length: uint64(n), HCAVA: uverbs.Addr(b), PD: c.PD, Access: access}, nil, nil)
	if err != nil {
		c.T.Fatalf("reg mr: %v", err)
	}
	return &MR{Buf: b, MR: mr}
}

// AllAccess is local write plus every remote access.
const AllAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic

// CompChannel creates a completion channel, closed when the test ends.
func (c *Ctx) CompChannel() int {
	c.T.Helper()
	fd, err := uverbs.CreateCompChannel(c.File)
	if err != nil {
		c.T.Fatalf("create comp channel: %v", err)
	}
	c.T.Cleanup(func() { _ = unix.Close(fd) })
	return fd
}

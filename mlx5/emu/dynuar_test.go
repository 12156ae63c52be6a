package emu_test

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/emutest"
	"github.com/shift-rdma/shift/uverbs"
)

// TestDynamicUARs: a context asking for MLX5_LIB_CAP_DYN_UAR, as libmlx5 always does, gets
// no static UAR pages; it allocates pages through the UAR object, maps them at the offsets
// returned, and must name one at create_cq, as mlx5_ib requires. Older kernel ABIs ignore
// the bit and lack the object.
func TestDynamicUARs(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 1})
	f, err := c.Hosts[0].Devices[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	req := mlx5.AllocUcontextReqV2{TotalNumBfregs: 4, NumLowLatencyBfregs: 1, MaxCQEVersion: 1, LibCaps: mlx5.LibCap4KUAR | mlx5.LibCapDynUAR}
	in := make([]byte, mlx5.AllocUcontextReqV2Size)
	req.Put(in)
	out := make([]byte, mlx5.AllocUcontextRespSize)
	ctx, err := uverbs.GetContext(f, uverbs.DriverIDMLX5, in, out)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ctx.AsyncFD)
	resp, err := mlx5.DecodeAllocUcontextResp(out)
	if err != nil {
		t.Fatal(err)
	}
	if resp.TotBfregs != 0 {
		t.Fatalf("tot_bfregs %d on a dynamic-UAR context, want 0", resp.TotBfregs)
	}
	_, err = f.Mmap(mlx5.MmapOffset(mlx5.MmapRegularPage, 0, 4096), 4096)
	wantErrno(t, "mmap of a static page that does not exist", err, unix.EINVAL)

	alloc := func(typ uint32) (handle, pageID uint32, off int64, n uint32) {
		t.Helper()
		var o [8]byte
		var l, p [4]byte
		cmd := uverbs.NewIoctl(mlx5.ObjectUAR, mlx5.MethodUARObjAlloc, uverbs.DriverIDMLX5)
		h := cmd.OutObj(mlx5.AttrUARObjAllocHandle)
		cmd.InU32(mlx5.AttrUARObjAllocType, typ)
		cmd.Out(mlx5.AttrUARObjAllocMmapOffset, o[:])
		cmd.Out(mlx5.AttrUARObjAllocMmapLength, l[:])
		cmd.Out(mlx5.AttrUARObjAllocPageID, p[:])
		if err := cmd.Exec(f, "ioctl UAR_OBJ_ALLOC"); err != nil {
			t.Fatal(err)
		}
		return cmd.Obj(h), binary.NativeEndian.Uint32(p[:]), int64(binary.NativeEndian.Uint64(o[:])), binary.NativeEndian.Uint32(l[:])
	}
	hNC, ncPage, ncOff, ncLen := alloc(mlx5.UARAllocTypeNC)
	_, bfPage, bfOff, _ := alloc(mlx5.UARAllocTypeBF)
	if ncLen != 4096 || ncPage == bfPage || ncOff == bfOff || ncOff%4096 != 0 {
		t.Fatalf("allocations: nc page %d at %#x (%d bytes), bf page %d at %#x", ncPage, ncOff, ncLen, bfPage, bfOff)
	}
	if cmd, _, _ := mlx5.DecodeMmapOffset(ncOff, 4096); cmd < 9 {
		t.Errorf("mmap offset %#x has command %d; mlx5_ib's entries start at 9", ncOff, cmd)
	}
	for _, off := range []int64{ncOff, bfOff} {
		if m, err := f.Mmap(off, 4096); err != nil || len(m) != 4096 {
			t.Fatalf("mmap %#x: %v", off, err)
		}
	}

	buf, db := emutest.Mem(t, 16*64), emutest.Mem(t, 64)
	createCQ := func(flags uint16, page uint16) error {
		d := mlx5.CreateCQ{BufAddr: uverbs.Addr(buf), DBAddr: uverbs.Addr(db), CQESize: 64, Flags: flags, UARPageIndex: page}
		b := make([]byte, mlx5.CreateCQSize)
		d.Put(b)
		_, err := uverbs.CreateCQ(f, uverbs.DriverIDMLX5, uverbs.CreateCQRequest{CQE: 15, CompChannel: -1, AsyncFD: -1}, b, make([]byte, mlx5.CreateCQRespSize))
		return err
	}
	wantErrno(t, "create_cq naming no page on a dynamic-UAR context", createCQ(0, 0), unix.EINVAL)
	wantErrno(t, "create_cq naming another page id", createCQ(mlx5.CreateCQFlagUARPageIndex, uint16(ncPage+100)), unix.EINVAL)
	if err := createCQ(mlx5.CreateCQFlagUARPageIndex, uint16(ncPage)); err != nil {
		t.Fatalf("create_cq on the NC page: %v", err)
	}

	d := uverbs.NewIoctl(mlx5.ObjectUAR, mlx5.MethodUARObjDestroy, uverbs.DriverIDMLX5)
	d.InObj(mlx5.AttrUARObjDestroyHandle, hNC)
	if err := d.Exec(f, "ioctl UAR_OBJ_DESTROY"); err != nil {
		t.Fatal(err)
	}
	_, err = f.Mmap(ncOff, 4096)
	wantErrno(t, "mmap of a destroyed UAR", err, unix.EINVAL)

	t.Run("older kernel", func(t *testing.T) {
		c := newCluster(t, emu.ClusterConfig{Hosts: 1, Kernel: emu.KernelWriteCreate})
		f, err := c.Hosts[0].Devices[0].Open()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		out := make([]byte, mlx5.AllocUcontextRespSize)
		ctx, err := uverbs.GetContextWrite(f, in, out)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(ctx.AsyncFD)
		if resp, _ := mlx5.DecodeAllocUcontextResp(out); resp.TotBfregs != 4 {
			t.Errorf("tot_bfregs %d, want the 4 static ones of a kernel without dynamic UARs", resp.TotBfregs)
		}
		cmd := uverbs.NewIoctl(mlx5.ObjectUAR, mlx5.MethodUARObjAlloc, uverbs.DriverIDMLX5)
		cmd.OutObj(mlx5.AttrUARObjAllocHandle)
		cmd.InU32(mlx5.AttrUARObjAllocType, mlx5.UARAllocTypeNC)
		wantErrno(t, "UAR object on an older kernel", cmd.Exec(f, "ioctl UAR_OBJ_ALLOC"), unix.EPROTONOSUPPORT)
	})
}

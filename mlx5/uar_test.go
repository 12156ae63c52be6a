package mlx5

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func TestBfregIndexes(t *testing.T) {
	// adjust_bfregn: net 0,1 -> 0,1; net 2,3 -> 4,5; net 5 -> 9.
	for net, gross := range map[uint32]uint32{0: 0, 1: 1, 2: 4, 3: 5, 5: 9, 511: 1021} {
		if g := GrossBfregIndex(net); g != gross {
			t.Errorf("GrossBfregIndex(%d) = %d, want %d", net, g, gross)
		}
		if n, err := NetBfregIndex(gross); err != nil || n != net {
			t.Errorf("NetBfregIndex(%d) = %d, %v", gross, n, err)
		}
	}
	if _, err := NetBfregIndex(2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("fast-path bfreg accepted: %v", err)
	}
}

func TestUARLayoutLocate(t *testing.T) {
	// 4 KiB pages, one UAR per page, 16 bfregs (8 pages): the rdma-core defaults.
	l := UARLayout{PageSize: 4096, UARsPerPage: 1, BfRegSize: 512, TotBfregs: 16}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	if l.NumSysPages() != 8 {
		t.Fatalf("pages %d", l.NumSysPages())
	}
	cases := []struct {
		gross          uint32
		page, off, buf int
	}{{0, 0, 0x800, 0}, {1, 0, 0xa00, 256}, {4, 1, 0x800, 256}, {5, 1, 0xa00, 256}, {29, 7, 0xa00, 256}}
	for _, c := range cases {
		b, err := l.Locate(c.gross)
		if err != nil || b.SysPage != c.page || b.Offset != c.off || b.BufSize != c.buf {
			t.Errorf("Locate(%d) = %+v, %v; want page %d off %#x buf %d", c.gross, b, err, c.page, c.off, c.buf)
		}
		for _, in := range []int{0, 8, 0x100, 0x1f8} {
			f, inReg, ok := l.Find(b.SysPage, b.Offset+in)
			if !ok || f.Index != c.gross || inReg != in {
				t.Errorf("Find(%d, %#x) = %+v %d %v", b.SysPage, b.Offset+in, f, inReg, ok)
			}
		}
	}
	if _, err := l.Locate(32); !errors.Is(err, ErrGeometry) {
		t.Errorf("bfreg beyond mapped pages: %v", err)
	}
	if _, _, ok := l.Find(0, CQDoorbellOffset); ok {
		t.Errorf("CQ doorbell offset mistaken for a bfreg")
	}
	// 64 KiB pages holding 16 UARs each (num_uars_per_page from a 4K-UAR kernel).
	l = UARLayout{PageSize: 65536, UARsPerPage: 16, BfRegSize: 512, TotBfregs: 32}
	b, err := l.Locate(GrossBfregIndex(3)) // UAR 1 of page 0, k=1
	if err != nil || b.SysPage != 0 || b.Offset != 4096+0xa00 {
		t.Errorf("64K page locate: %+v %v", b, err)
	}
	if got := l.HWUARIndex(3); got != 1 {
		t.Errorf("HWUARIndex(3) = %d", got)
	}
	resp := AllocUcontextResp{BfRegSize: 512, TotBfregs: 16}
	l, err = LayoutFromResp(&resp, &AllocUcontextReqV2{NumLowLatencyBfregs: 4}, 4096)
	if err != nil || l.UARsPerPage != 1 || l.LowLatencyBfregs != 4 {
		t.Errorf("old-kernel layout %+v %v", l, err)
	}
	for _, bad := range []UARLayout{
		{PageSize: 1000, UARsPerPage: 1, BfRegSize: 512, TotBfregs: 2},
		{PageSize: 4096, UARsPerPage: 2, BfRegSize: 512, TotBfregs: 4},
		{PageSize: 4096, UARsPerPage: 1, BfRegSize: 1024, TotBfregs: 2},
		{PageSize: 4096, UARsPerPage: 1, BfRegSize: 512, TotBfregs: 3},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrGeometry) {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestMmapOffsets(t *testing.T) {
	cases := []struct {
		cmd, idx int
		want     int64
	}{
		{MmapRegularPage, 0, 0},
		{MmapRegularPage, 3, 3 * 4096},
		{MmapNCPage, 1, (3<<8 | 1) * 4096},
		{MmapWCPage, 255, (2<<8 | 255) * 4096},
		{MmapAllocWC, 0x1234, (0x12<<16 | 6<<8 | 0x34) * 4096},
		{MmapCoreClock, 0, 5 << 8 * 4096},
	}
	for _, c := range cases {
		if got := MmapOffset(c.cmd, c.idx, 4096); got != c.want {
			t.Errorf("MmapOffset(%d, %d) = %#x, want %#x", c.cmd, c.idx, got, c.want)
		}
		cmd, idx, err := DecodeMmapOffset(c.want, 4096)
		if err != nil || cmd != c.cmd || idx != c.idx {
			t.Errorf("DecodeMmapOffset(%#x) = %d, %d, %v", c.want, cmd, idx, err)
		}
	}
	if _, _, err := DecodeMmapOffset(4097, 4096); !errors.Is(err, unix.EINVAL) {
		t.Errorf("unaligned offset: %v", err)
	}
}

package emu

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/uverbs"
)

// Dynamic UARs (mlx5_ib's MLX5_IB_OBJECT_UAR). A context created with MLX5_LIB_CAP_DYN_UAR,
// which libmlx5 always asks for, gets no static UAR pages (tot_bfregs 0): the library
// allocates pages itself, one NC page for CQ doorbells and BF pages for QPs, maps each at the
// mmap offset the allocation returns, and names a page by its page id at create_cq
// (MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX) and create_qp (MLX5_QP_FLAG_UAR_PAGE_INDEX). Which
// register of a page a QP rings is then the library's choice, so the device accepts the QP's
// doorbells on any register of its page.

// dynUAR is one allocated page.
type dynUAR struct {
	page    uarPage
	nc      bool
	mmapIdx int // the entry's index under mlx5.MmapOffsetStart
	freed   bool
}

// mmapOffset is the page's mmap offset (mlx5_entry_to_mmap_offset).
func (u *dynUAR) mmapOffset() int64 {
	return mlx5.MmapOffset(mlx5.MmapOffsetStart, u.mmapIdx, pageSize)
}

func (f *File) iUARAlloc(r *uverbs.IoctlRequest) error {
	typ, err := r.Const(mlx5.AttrUARObjAllocType)
	if err != nil {
		return err
	}
	if typ != mlx5.UARAllocTypeBF && typ != mlx5.UARAllocTypeNC {
		return fmt.Errorf("uar type %d: %w", typ, unix.EOPNOTSUPP)
	}
	page, err := f.dev.hw.allocUAR()
	if err != nil {
		return fmt.Errorf("alloc uar: %w", err)
	}
	u := &dynUAR{page: page, nc: typ == mlx5.UARAllocTypeNC, mmapIdx: len(f.ctx.dyn)}
	f.ctx.dyn = append(f.ctx.dyn, u)
	h := f.handles.add(objUAR, u)
	var off [8]byte
	binary.NativeEndian.PutUint64(off[:], uint64(u.mmapOffset()))
	if err = r.Out(mlx5.AttrUARObjAllocPageID, u32b(page.PageID())); err == nil {
		if err = r.Out(mlx5.AttrUARObjAllocMmapLength, u32b(pageSize)); err == nil {
			if err = r.Out(mlx5.AttrUARObjAllocMmapOffset, off[:]); err == nil {
				err = r.SetObj(mlx5.AttrUARObjAllocHandle, h)
			}
		}
	}
	if err != nil {
		_ = f.destroyUARLocked(h)
	}
	return err
}

func (f *File) iUARDestroy(r *uverbs.IoctlRequest) error {
	h, err := r.Obj(mlx5.AttrUARObjDestroyHandle)
	if err != nil {
		return err
	}
	return f.destroyUARLocked(h)
}

// destroyUARLocked drops the handle. The page itself stays until the context goes, as the
// kernel keeps it while a mapping (and any QP or CQ on it) holds a reference.
func (f *File) destroyUARLocked(h uint32) error {
	o, err := f.handles.remove(objUAR, h, nil)
	if err != nil {
		return fmt.Errorf("destroy uar: %w", err)
	}
	o.(*dynUAR).freed = true
	return nil
}

// uarByPageID is the context's UAR page (static or dynamic) with the device's page id id.
func (c *ucontext) uarByPageID(id uint32) (uarPage, bool) {
	for _, u := range c.uars {
		if u.PageID() == id {
			return u, true
		}
	}
	for _, u := range c.dyn {
		if !u.freed && u.page.PageID() == id {
			return u.page, true
		}
	}
	return nil, false
}

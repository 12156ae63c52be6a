package emu

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
)

// ucontext is the mlx5 part of a context (struct mlx5_ib_ucontext): the static UAR pages
// and the blue-flame registers (bfregs) handed to QPs.
type ucontext struct {
	totBfregs  uint32    // net bfregs (two per UAR page)
	lowLat     uint32    // the last lowLat bfregs are given to one QP each
	uars       []uarPage // static system pages, mmap index order
	bfregUse   []int     // QPs per net bfreg
	cqeVersion uint8
}

// allocUcontext is mlx5_ib_alloc_ucontext: validate the request, allocate the static UAR
// pages, fill the response.
func (f *File) allocUcontext(req mlx5.AllocUcontextReqV2, v2 bool) (mlx5.AllocUcontextResp, error) {
	var resp mlx5.AllocUcontextResp
	if req.Flags != 0 {
		return resp, fmt.Errorf("alloc_ucontext: flags %#x: %w", req.Flags, unix.EOPNOTSUPP)
	}
	if req.CompMask != 0 {
		return resp, fmt.Errorf("alloc_ucontext: comp_mask %#x: %w", req.CompMask, unix.EOPNOTSUPP)
	}
	tot := (req.TotalNumBfregs + mlx5.NonFPBfregsPerUAR - 1) &^ (mlx5.NonFPBfregsPerUAR - 1)
	if tot > mlx5.MaxBfregs {
		return resp, fmt.Errorf("alloc_ucontext: %d bfregs: %w", tot, unix.ENOMEM)
	}
	if tot == 0 || req.NumLowLatencyBfregs > tot-1 {
		return resp, fmt.Errorf("alloc_ucontext: %d low-latency of %d bfregs: %w", req.NumLowLatencyBfregs, tot, unix.EINVAL)
	}
	pages := tot / mlx5.NonFPBfregsPerUAR
	uars := make([]uarPage, 0, pages)
	for range pages {
		u, err := f.dev.hw.allocUAR()
		if err != nil {
			for _, u := range uars {
				_ = f.dev.hw.freeUAR(u)
			}
			return resp, fmt.Errorf("alloc_ucontext: %w", err)
		}
		uars = append(uars, u)
	}
	f.ctx = ucontext{totBfregs: tot, lowLat: req.NumLowLatencyBfregs, uars: uars, bfregUse: make([]int, tot)}
	if v2 && req.MaxCQEVersion >= 1 {
		f.ctx.cqeVersion = 1
	}
	c := &f.dev.caps
	resp = mlx5.AllocUcontextResp{
		QPTabSize:      c.MaxQP,
		BfRegSize:      mlx5.DefaultBfRegSize,
		TotBfregs:      tot,
		CacheLineSize:  64,
		MaxSQDescSz:    1024,
		MaxRQDescSz:    512,
		MaxSendWQEBB:   c.MaxQPWR,
		MaxRecvWR:      c.MaxQPWR,
		MaxSRQRecvWR:   c.MaxSRQWR + 1,
		NumPorts:       uint16(len(f.dev.ports)),
		CQEVersion:     f.ctx.cqeVersion,
		CmdsSuppUHW:    1, // MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE
		EthMinInline:   1, // MLX5_USER_INLINE_MODE_NONE + 1: no inline headers needed
		LogUARSize:     12,
		NumUARsPerPage: 1,
	}
	f.hasContext = true
	return resp, nil
}

// allocBfreg gives the QP a blue-flame register of its own: a low-latency one if free (the
// last lowLat bfregs, as mlx5_ib's alloc_bfreg prefers), else any free one. mlx5_ib would
// share medium-latency bfregs between QPs once the dedicated ones run out; the device model
// cannot tell two QPs' doorbells apart in one register (nic.CreateQP explains why), so here
// a context has at most totBfregs QPs and the next create_qp fails with ENOMEM. Libraries
// ask for more with a larger total_num_bfregs.
func (c *ucontext) allocBfreg() (uint32, bool) {
	first := c.totBfregs - c.lowLat
	for i := first; i < c.totBfregs; i++ {
		if c.bfregUse[i] == 0 {
			c.bfregUse[i]++
			return i, true
		}
	}
	for i := uint32(0); i < first; i++ {
		if c.bfregUse[i] == 0 {
			c.bfregUse[i]++
			return i, true
		}
	}
	return 0, false
}

func (c *ucontext) freeBfreg(net uint32) {
	if int(net) < len(c.bfregUse) && c.bfregUse[net] > 0 {
		c.bfregUse[net]--
	}
}

// bfregPage returns the UAR page and register (0..3 in the page) of a net bfreg index.
func (c *ucontext) bfregPage(net uint32) (uarPage, int) {
	gross := mlx5.GrossBfregIndex(net)
	return c.uars[gross/mlx5.BfregsPerUAR], int(gross % mlx5.BfregsPerUAR)
}

func (f *File) releaseUARs() {
	for _, u := range f.ctx.uars {
		_ = f.dev.hw.freeUAR(u)
	}
	f.ctx.uars = nil
}

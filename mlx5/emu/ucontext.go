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
	ver        int       // 2 for a v2 request (bfregs by latency class), else 0: all on bfreg 0
	cqeVersion uint8
	// dynamic UARs (lib_uar_dyn): no static pages; the library allocates them
	dynUARs bool
	dyn     []*dynUAR // by mmap entry index
}

// allocUcontext is mlx5_ib_alloc_ucontext: validate the request, allocate the static UAR
// pages, fill the response.
func (f *File) allocUcontext(req mlx5.AllocUcontextReqV2, v2 bool) (mlx5.AllocUcontextResp, error) {
	var resp mlx5.AllocUcontextResp
	if req.Flags&^mlx5.AllocUctxDEVX != 0 {
		return resp, fmt.Errorf("alloc_ucontext: flags %#x: %w", req.Flags, unix.EOPNOTSUPP)
	}
	if req.Flags&mlx5.AllocUctxDEVX != 0 {
		// mlx5_ib_devx_create on a device whose log_max_uctx is 0: the emulated device
		// has no firmware command interface to offer (libmlx5 then opens without DEVX).
		return resp, fmt.Errorf("alloc_ucontext: DEVX requested, but the device offers no DEVX (log_max_uctx 0): %w", unix.EINVAL)
	}
	if req.CompMask != 0 {
		return resp, fmt.Errorf("alloc_ucontext: comp_mask %#x: %w", req.CompMask, unix.EOPNOTSUPP)
	}
	// mlx5_ib_alloc_ucontext aligns the total to whole UAR pages and checks the low-latency
	// count against it (u32 arithmetic: a total of 0 passes here), then calc_total_bfregs
	// refuses a zero total (EINVAL) and one above MLX5_MAX_BFREGS (ENOMEM) and aligns to
	// the bfregs of a system page (one UAR page with 4 KiB UARs and pages).
	tot := (req.TotalNumBfregs + mlx5.NonFPBfregsPerUAR - 1) &^ (mlx5.NonFPBfregsPerUAR - 1)
	if req.NumLowLatencyBfregs > tot-1 && tot != 0 {
		return resp, fmt.Errorf("alloc_ucontext: %d low-latency of %d bfregs: %w", req.NumLowLatencyBfregs, tot, unix.EINVAL)
	}
	// lib_uar_dyn (libmlx5 always asks): no static pages at all, whatever the request's
	// counts; mlx5_ib skips calc_total_bfregs and answers tot_bfregs 0.
	// The older kernel ABIs model kernels from before dynamic UARs, which ignore the bit.
	dyn := v2 && req.LibCaps&mlx5.LibCapDynUAR != 0 && f.dev.kernel == KernelCurrent
	if !dyn && tot == 0 {
		return resp, fmt.Errorf("alloc_ucontext: no bfregs: %w", unix.EINVAL)
	}
	if !dyn && tot > mlx5.MaxBfregs {
		return resp, fmt.Errorf("alloc_ucontext: %d bfregs above %d: %w", tot, mlx5.MaxBfregs, unix.ENOMEM)
	}
	pages := tot / mlx5.NonFPBfregsPerUAR
	if dyn {
		tot, pages = 0, 0
	}
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
	f.ctx = ucontext{totBfregs: tot, lowLat: req.NumLowLatencyBfregs, uars: uars, bfregUse: make([]int, tot), dynUARs: dyn}
	if v2 {
		f.ctx.ver = 2
	}
	if v2 && req.MaxCQEVersion >= 1 && !f.dev.caps.CQEVersion0Only {
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

// allocBfreg is mlx5_ib's alloc_bfreg for a QP. Net bfreg 0 has no BlueFlame buffer; bfregs
// 1..med are the medium-latency class, shared between QPs; the last lowLat are the
// low-latency class, one QP each. A v2 context gets a free low-latency bfreg first, else the
// least-used medium one (the first unused, else the lowest count: round robin as QPs come),
// and when there is no medium class, or for a v1 context, bfreg 0, which any number of QPs
// share. It never fails: mlx5_ib limits QPs by the device's QP table, not by bfregs. shared
// says whether the bfreg may carry other QPs.
func (c *ucontext) allocBfreg() (net uint32, shared bool) {
	tot := int(c.totBfregs)
	med := max(tot-int(c.lowLat)-1, 0)
	if c.ver >= 2 {
		for i := med + 1; i < tot; i++ {
			if c.bfregUse[i] == 0 {
				c.bfregUse[i]++
				return uint32(i), false
			}
		}
		if med > 0 {
			mini := 1
			for i := 1; i < med+1; i++ {
				if c.bfregUse[i] < c.bfregUse[mini] {
					mini = i
				}
				if c.bfregUse[mini] == 0 {
					break
				}
			}
			c.bfregUse[mini]++
			return uint32(mini), true
		}
	}
	c.bfregUse[0]++
	return 0, true
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
	for _, u := range f.ctx.dyn {
		_ = f.dev.hw.freeUAR(u.page)
	}
	f.ctx.uars, f.ctx.dyn = nil, nil
}

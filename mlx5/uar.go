package mlx5

import "golang.org/x/sys/unix"

// UAR (User Access Region) geometry and the blue-flame register ("bfreg") index arithmetic
// shared by libmlx5 (providers/mlx5/mlx5.c mlx5_init_context, verbs.c) and the kernel's mlx5_ib
// (qp.c adjust_bfregn, bfregn_to_uar_index; main.c uar_mmap).
//
// A UAR is a 4 KiB adapter page. Each UAR holds four bfregs at 0x800 + k*bf_reg_size; the
// first two (k = 0, 1) are the "non fast path" bfregs the kernel hands out, which is why the
// kernel counts bfregs net (two per UAR) and libmlx5 gross (four per UAR). Each bfreg is split
// into two halves of bf_reg_size/2 bytes used alternately, so that a BlueFlame write never
// lands on the buffer the NIC may still be reading from the previous one. A system page
// (the mmap unit) holds num_uars_per_page UARs.
const (
	AdapterPageSize     = 4096  // MLX5_ADAPTER_PAGE_SIZE
	BFOffset            = 0x800 // MLX5_BF_OFFSET: first bfreg inside a UAR
	NonFPBfregsPerUAR   = 2     // MLX5_NUM_NON_FP_BFREGS_PER_UAR
	BfregsPerUAR        = 4     // NUM_BFREGS_PER_UAR (MLX5_BFREGS_PER_UAR in the kernel)
	MaxUARs             = 1 << 8
	MaxBfregs           = MaxUARs * NonFPBfregsPerUAR // MLX5_MAX_BFREGS
	DefTotalBfregs      = 8 * NonFPBfregsPerUAR       // MLX5_DEF_TOT_UUARS
	DefLowLatencyBfregs = 4                           // get_num_low_lat_uuars default
	DefaultBfRegSize    = 512                         // bf_reg_size of every ConnectX (log_bf_reg_size 9)
	MedBfregsThreshold  = 12                          // MLX5_MED_BFREGS_TSHOLD
)

// GrossBfregIndex converts the kernel's net bfreg number (two per UAR) into the index
// libmlx5 uses for its bfs[] table (four per UAR), as the kernel's adjust_bfregn does before
// returning it in CreateQPResp.BfregIndex.
func GrossBfregIndex(net uint32) uint32 {
	return net/NonFPBfregsPerUAR*BfregsPerUAR + net%NonFPBfregsPerUAR
}

// NetBfregIndex inverts GrossBfregIndex; gross indexes of fast-path bfregs (k = 2, 3) have no
// net number.
func NetBfregIndex(gross uint32) (uint32, error) {
	k := gross % BfregsPerUAR
	if k >= NonFPBfregsPerUAR {
		return 0, newErr("net bfreg index", ErrMalformed, unix.EINVAL, "gross index %d is a fast-path bfreg", gross)
	}
	return gross/BfregsPerUAR*NonFPBfregsPerUAR + k, nil
}

// UARLayout is the UAR geometry of one context, from the alloc_ucontext exchange.
type UARLayout struct {
	PageSize         int // system page size, the mmap unit
	UARsPerPage      int // UARs per system page (num_uars_per_page; 1 on old kernels)
	BfRegSize        int // bf_reg_size
	TotBfregs        int // tot_bfregs (net)
	LowLatencyBfregs int // num_low_latency_bfregs requested
}

// LayoutFromResp derives the layout libmlx5 computes in adjust_uar_info and
// mlx5_init_context from the kernel's response and the page size.
func LayoutFromResp(r *AllocUcontextResp, req *AllocUcontextReqV2, pageSize int) (UARLayout, error) {
	l := UARLayout{PageSize: pageSize, UARsPerPage: int(r.NumUARsPerPage), BfRegSize: int(r.BfRegSize), TotBfregs: int(r.TotBfregs)}
	if req != nil {
		l.LowLatencyBfregs = int(req.NumLowLatencyBfregs)
	}
	if r.LogUARSize == 0 && r.NumUARsPerPage == 0 {
		l.UARsPerPage = 1 // old kernel: one UAR per system page
	}
	return l, l.Validate()
}

// Validate checks the geometry the way the arithmetic below needs it.
func (l UARLayout) Validate() error {
	switch {
	case l.PageSize < AdapterPageSize || l.PageSize%AdapterPageSize != 0:
		return newErr("uar layout", ErrGeometry, unix.EINVAL, "page size %d", l.PageSize)
	case l.UARsPerPage < 1 || l.UARsPerPage*AdapterPageSize > l.PageSize:
		return newErr("uar layout", ErrGeometry, unix.EINVAL, "%d UARs per %d-byte page", l.UARsPerPage, l.PageSize)
	case l.BfRegSize <= 0 || BFOffset+BfregsPerUAR*l.BfRegSize > AdapterPageSize:
		return newErr("uar layout", ErrGeometry, unix.EINVAL, "bf_reg_size %d", l.BfRegSize)
	case l.TotBfregs <= 0 || l.TotBfregs > MaxBfregs || l.TotBfregs%(l.UARsPerPage*NonFPBfregsPerUAR) != 0:
		return newErr("uar layout", ErrGeometry, unix.EINVAL, "tot_bfregs %d", l.TotBfregs)
	}
	return nil
}

// NumSysPages is the number of system pages libmlx5 maps at context creation
// (num_sys_page_map in mlx5_init_context).
func (l UARLayout) NumSysPages() int { return l.TotBfregs / (l.UARsPerPage * NonFPBfregsPerUAR) }

// Bfreg locates one blue-flame register.
type Bfreg struct {
	Index   uint32 // gross index (libmlx5 bfs[] index, CreateQPResp.BfregIndex)
	SysPage int    // which mapped system page (mmap index) holds it
	Offset  int    // byte offset of the register inside that page
	// BufSize is the size of one of the two alternating halves; 0 for bfreg 0, which
	// libmlx5 never uses for BlueFlame (it takes no lock and must only ring 8-byte doorbells).
	BufSize int
}

// Locate returns where the bfreg with gross index i lives, as mlx5_init_context computes
// bfs[i].reg and buf_size.
func (l UARLayout) Locate(i uint32) (Bfreg, error) {
	uar := int(i / BfregsPerUAR)
	k := int(i % BfregsPerUAR)
	page := uar / l.UARsPerPage
	if page >= l.NumSysPages() {
		return Bfreg{}, newErr("locate bfreg", ErrGeometry, unix.EINVAL, "bfreg %d beyond %d mapped pages", i, l.NumSysPages())
	}
	b := Bfreg{Index: i, SysPage: page, Offset: (uar%l.UARsPerPage)*AdapterPageSize + BFOffset + k*l.BfRegSize}
	if i != 0 {
		b.BufSize = l.BfRegSize / 2
	}
	return b, nil
}

// Find is the inverse of Locate for a device model: given a byte offset inside mapped system
// page sysPage, it returns the bfreg whose register (both halves) contains it and the offset
// inside that register. ok is false for offsets outside any bfreg (for instance the CQ
// doorbell at CQDoorbell).
func (l UARLayout) Find(sysPage, off int) (b Bfreg, inReg int, ok bool) {
	if sysPage < 0 || sysPage >= l.NumSysPages() || off < 0 || off >= l.UARsPerPage*AdapterPageSize {
		return Bfreg{}, 0, false
	}
	j, in := off/AdapterPageSize, off%AdapterPageSize
	if in < BFOffset || in >= BFOffset+BfregsPerUAR*l.BfRegSize {
		return Bfreg{}, 0, false
	}
	k := (in - BFOffset) / l.BfRegSize
	i := uint32((sysPage*l.UARsPerPage+j)*BfregsPerUAR + k)
	b, err := l.Locate(i)
	if err != nil {
		return Bfreg{}, 0, false
	}
	return b, off - b.Offset, true
}

// HWUARIndex is the kernel's bfregn_to_uar_index for a static bfreg: the index of the UAR
// (relative to the context's first UAR) that a net bfreg number belongs to.
func (l UARLayout) HWUARIndex(net uint32) int {
	perPage := uint32(l.UARsPerPage * NonFPBfregsPerUAR)
	return int(net/perPage)*l.UARsPerPage + int(net%perPage/NonFPBfregsPerUAR)
}

// CQDoorbellOffset is where libmlx5 rings the CQ arm doorbell: MLX5_CQ_DOORBELL inside the
// first mapped system page (cq_uar_reg = uar[0].reg).
const CQDoorbellOffset = CQDoorbell

// mmap offset encoding (enum mlx5_ib_mmap_cmd in rdma/mlx5-abi.h; MLX5_IB_MMAP_CMD_SHIFT and
// set_command/set_index/set_extended_index in providers/mlx5/mlx5.h). The page offset is
// cmd << 8 | index, with ALLOC_WC indexes >= 256 carrying bits 15:8 of the index at bit 16;
// the byte offset passed to mmap is that times the page size.
const (
	MmapRegularPage        = 0 // MLX5_IB_MMAP_REGULAR_PAGE (MLX5_MMAP_GET_REGULAR_PAGES_CMD)
	MmapGetContiguousPages = 1 // MLX5_IB_MMAP_GET_CONTIGUOUS_PAGES
	MmapWCPage             = 2 // MLX5_IB_MMAP_WC_PAGE
	MmapNCPage             = 3 // MLX5_IB_MMAP_NC_PAGE (MLX5_MMAP_GET_NC_PAGES_CMD)
	MmapCoreClock          = 5 // MLX5_IB_MMAP_CORE_CLOCK
	MmapAllocWC            = 6 // MLX5_IB_MMAP_ALLOC_WC
	MmapClockInfo          = 7 // MLX5_IB_MMAP_CLOCK_INFO
	MmapDeviceMem          = 8 // MLX5_IB_MMAP_DEVICE_MEM
	MmapCmdShift           = 8 // MLX5_IB_MMAP_CMD_SHIFT
	// MmapOffsetStart is mlx5_ib's MLX5_IB_MMAP_OFFSET_START (kernel-internal, not in the
	// uapi): commands from it on name mmap entries (dynamic UARs) by an extended index.
	MmapOffsetStart        = 9
	MmapCmdMask            = 0xff
	mmapExtendedIndexShift = 16
)

// MmapOffset returns the byte offset libmlx5 passes to mmap for (cmd, index), as
// get_uar_mmap_offset does.
func MmapOffset(cmd, index int, pageSize int) int64 {
	var pg int64 = int64(cmd) << MmapCmdShift
	if (cmd == MmapAllocWC || cmd >= MmapOffsetStart) && index >= 1<<MmapCmdShift {
		pg |= int64(index&0xff) | int64(index>>8)<<mmapExtendedIndexShift
	} else {
		pg |= int64(index)
	}
	return pg * int64(pageSize)
}

// DecodeMmapOffset splits an mmap byte offset into command and index as mlx5_ib_mmap does
// (get_command, get_index / get_extended_index). The offset must be page aligned.
func DecodeMmapOffset(offset int64, pageSize int) (cmd, index int, err error) {
	if pageSize <= 0 || offset < 0 || offset%int64(pageSize) != 0 {
		return 0, 0, newErr("decode mmap offset", ErrMalformed, unix.EINVAL, "offset %#x, page size %d", offset, pageSize)
	}
	pg := offset / int64(pageSize)
	cmd = int(pg>>MmapCmdShift) & MmapCmdMask
	index = int(pg & 0xff)
	if cmd == MmapAllocWC || cmd >= MmapOffsetStart {
		index |= int((pg>>mmapExtendedIndexShift)&0xff) << 8
	}
	return cmd, index, nil
}

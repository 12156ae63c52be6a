package provider

import (
	"errors"
	"fmt"
	"net"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
	"github.com/shift-rdma/shift/uverbs"
)

// Context is an open mlx5 device (struct ibv_context + struct mlx5_context): the command file,
// the async event fd, the UAR pages mapped at creation and the limits learned from
// alloc_ucontext.
type Context struct {
	name     string
	info     uverbs.DeviceInfo
	f        uverbs.File
	asyncFD  int
	numCompV uint32
	cmds     cmdPaths // commands the kernel offers only as write()

	resp   mlx5.AllocUcontextResp
	layout mlx5.UARLayout
	lim    queueLimits
	uars   []mlx5.UARPage // mapped system pages, index = mmap page index
	maps   [][]byte

	mu     sync.Mutex
	bfs    map[uint32]*mlx5.BFReg // bfregs handed to QPs, by gross index
	cqByID map[uint64]*CQ         // by user handle, for completion and async events
	qpByID map[uint64]*QP         // by user handle, for async events
	nextID uint64
	uidx   userIndexes // CQE version 1 user indexes of live QPs
	closed bool
}

// Devices lists the real devices in sysfs and the registered emulated ones.
func Devices() ([]uverbs.DeviceInfo, error) {
	d, err := uverbs.Devices()
	return d, opError("list devices", err)
}

// Options configure a provider Context. The zero value asks for libmlx5's defaults; the
// library reads no environment variable: the libibverbs plugin (and SHIFT's other edges,
// package internal/shiftenv) fill them from MLX5_TOTAL_UUARS and MLX5_NUM_LOW_LAT_UUARS as
// libmlx5 reads those.
//
// They size the context's blue-flame registers (bfregs) in the alloc_ucontext request:
//
//   - TotalBfregs: total bfregs (0: 16), at least one system page's worth, rounded up to an
//     even number; negative fails with EINVAL, above 512 (MLX5_MAX_BFREGS) with ENOMEM.
//   - LowLatencyBfregs: low-latency bfregs (nil: 4), raised to total-12 so at most 12 are
//     shared (MLX5_MED_BFREGS_TSHOLD); negative fails with EINVAL, more than total-1 with
//     ENOMEM.
//
// The kernel gives each of the first QPs a low-latency bfreg of its own and then shares the
// medium-latency ones between QPs (rung under the register's lock), so the number of QPs per
// context is not limited by these values; they only decide how many QPs ring without a lock.
type Options struct {
	TotalBfregs      int
	LowLatencyBfregs *int
	// NoDeviceWake: the doorbells of this context do not wake an in-process device model
	// that parked (mlx5.UARWaker, the emulated ConnectX; nothing on hardware). The plugin
	// sets it: its posts run in cgo callbacks on the application's threads, where the wake's
	// yield hands the thread's processor off and back (BenchmarkVerbs, SHIFT mode: 0.30–0.41
	// µs a post without the wake, 1.3–2.4 µs with it), and its C fast path does not wake.
	NoDeviceWake bool
}

// Check is the error OpenWith would return for o's bfreg counts on this system (nil: none),
// without opening anything: the edges check what they read before a device is opened.
func (o Options) Check() error {
	_, _, err := bfregRequest(o, unix.Getpagesize())
	return err
}

// Open opens the device called name with zero Options (OpenWith).
func Open(name string) (*Context, error) { return OpenWith(name, Options{}) }

// OpenWith opens the device called name and creates its context as mlx5_init_context does:
// alloc_ucontext with the libmlx5 request that opts size, then the UAR system pages mapped
// one by one.
func OpenWith(name string, opts Options) (*Context, error) {
	f, info, err := uverbs.Open(name)
	if err != nil {
		return nil, opError("open "+name, err)
	}
	c, err := newContext(name, info, f, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// OpenFile creates a context on f, a command file already open on the device info describes
// (the command fd libibverbs opened, wrapped by uverbs.NewCdev, or an emulated file). On
// success the context owns f; on error the caller still does.
func OpenFile(info uverbs.DeviceInfo, f uverbs.File) (*Context, error) {
	return OpenFileWith(info, f, Options{})
}

// OpenFileWith is OpenFile with Options.
func OpenFileWith(info uverbs.DeviceInfo, f uverbs.File, opts Options) (*Context, error) {
	return newContext(info.Name, info, f, opts)
}

func newContext(name string, info uverbs.DeviceInfo, f uverbs.File, opts Options) (*Context, error) {
	if !info.Emulated {
		if err := info.CheckDriverABI(mlx5.ABIVersion, mlx5.ABIVersion); err != nil {
			return nil, opError("open "+name, err)
		}
	}
	c := &Context{name: name, info: info, f: f, asyncFD: -1,
		bfs: map[uint32]*mlx5.BFReg{}, cqByID: map[uint64]*CQ{}, qpByID: map[uint64]*QP{}}
	// CQE version 1, as libmlx5 asks: every QP carries a user index the provider assigns,
	// and the device writes it into the QP's CQEs. A kernel or device without it answers 0,
	// and QPs are then created with the "no user index" value. Completions are matched to
	// their QP by the QPN, which an RC QP's CQEs carry in either version.
	tot, lowLat, err := bfregRequest(opts, unix.Getpagesize())
	if err != nil {
		return nil, opError("get context", err)
	}
	req := mlx5.AllocUcontextReqV2{TotalNumBfregs: tot,
		NumLowLatencyBfregs: lowLat, MaxCQEVersion: 1, LibCaps: mlx5.LibCap4KUAR}
	var in [mlx5.AllocUcontextReqV2Size]byte
	var out [mlx5.AllocUcontextRespSize]byte
	req.Put(in[:])
	uc, err := viaIoctl(&c.cmds, cmdGetContext,
		func() (uverbs.Context, error) { return uverbs.GetContext(f, uverbs.DriverIDMLX5, in[:], out[:]) },
		func() (uverbs.Context, error) { return uverbs.GetContextWrite(f, in[:], out[:]) })
	if err != nil {
		return nil, opError("get context", err)
	}
	c.asyncFD, c.numCompV = uc.AsyncFD, uc.NumCompVectors
	// Non-blocking for the reason CreateCompChannel gives: GetAsyncEvent polls, then reads,
	// and destroying a QP or CQ drops its unread events in between.
	if err := unix.SetNonblock(c.asyncFD, true); err != nil {
		c.release()
		return nil, opError("get context: set O_NONBLOCK on the async fd", err)
	}
	resp, err := mlx5.DecodeAllocUcontextResp(out[:])
	if err != nil {
		c.release()
		return nil, opError("get context", err)
	}
	c.resp = resp
	if resp.CQEVersion > 1 {
		// The kernel answers min(requested, supported).
		c.release()
		return nil, fmt.Errorf("provider: get context: kernel chose CQE version %d, asked for at most 1: %w", resp.CQEVersion, verbs.ErrInvalidArgument)
	}
	c.lim = queueLimits{MaxSQDescSize: int(resp.MaxSQDescSz), MaxRQDescSize: int(resp.MaxRQDescSz),
		MaxSendWQEBB: int(resp.MaxSendWQEBB), MaxRecvWR: int(resp.MaxRecvWR)}
	ps := unix.Getpagesize()
	c.layout, err = mlx5.LayoutFromResp(&resp, &req, ps)
	if err != nil {
		c.release()
		return nil, opError("get context", err)
	}
	for i := 0; i < c.layout.NumSysPages(); i++ {
		m, err := f.Mmap(mlx5.MmapOffset(mlx5.MmapRegularPage, i, ps), ps)
		if err != nil {
			c.release()
			return nil, opError(fmt.Sprintf("mmap UAR page %d", i), err)
		}
		c.maps = append(c.maps, m)
		// mlx5_ib maps UAR pages VM_DONTCOPY; mark them the same where the file is not the
		// kernel (an emulated UAR is ordinary memory): a forked child gets no doorbells.
		_ = unix.Madvise(m, unix.MADV_DONTFORK)
		p, err := mlx5.NewUARPage(m)
		if err != nil {
			c.release()
			return nil, opError("mmap UAR", err)
		}
		if opts.NoDeviceWake {
			p = p.WithoutWake()
		}
		c.uars = append(c.uars, p)
	}
	return c, nil
}

// bfregRequest is libmlx5's get_total_uuars and get_num_low_lat_uuars with the check
// mlx5_init_context makes between them: the total_num_bfregs and num_low_latency_bfregs of
// the alloc_ucontext request, from opts (Options); pageSize is the system page size.
func bfregRequest(opts Options, pageSize int) (tot, lowLat uint32, err error) {
	total := mlx5.DefTotalBfregs
	if opts.TotalBfregs != 0 {
		total = opts.TotalBfregs
	}
	if total < 1 {
		return 0, 0, fmt.Errorf("%d total bfregs: %w (%w)", total, verbs.ErrInvalidArgument, unix.EINVAL)
	}
	perPage := pageSize / mlx5.AdapterPageSize * mlx5.NonFPBfregsPerUAR
	total = max(total, perPage)
	total = (total + mlx5.NonFPBfregsPerUAR - 1) / mlx5.NonFPBfregsPerUAR * mlx5.NonFPBfregsPerUAR
	if total > mlx5.MaxBfregs {
		return 0, 0, fmt.Errorf("%d bfregs above %d: %w (%w)", total, mlx5.MaxBfregs, verbs.ErrInvalidArgument, unix.ENOMEM)
	}
	low := mlx5.DefLowLatencyBfregs
	if opts.LowLatencyBfregs != nil {
		low = *opts.LowLatencyBfregs
	}
	if low < 0 {
		return 0, 0, fmt.Errorf("%d low-latency bfregs: %w (%w)", low, verbs.ErrInvalidArgument, unix.EINVAL)
	}
	low = max(low, total-mlx5.MedBfregsThreshold)
	if low > total-1 {
		return 0, 0, fmt.Errorf("%d low-latency of %d bfregs: %w (%w)", low, total, verbs.ErrInvalidArgument, unix.ENOMEM)
	}
	return uint32(total), uint32(low), nil
}

func (c *Context) release() {
	for _, m := range c.maps {
		c.f.Munmap(m)
	}
	c.maps, c.uars = nil, nil
	if c.asyncFD >= 0 {
		unix.Close(c.asyncFD)
		c.asyncFD = -1
	}
}

// Close releases the context. Objects still alive are destroyed by the kernel (as on the
// last close of the cdev); their rings are then unmapped here, and they answer ErrClosed.
// MR memory stays the caller's.
func (c *Context) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.release()
	err := opError("close", c.f.Close())
	// The device no longer touches any ring of this context: free what callers left.
	c.mu.Lock()
	qps, cqs := c.qpByID, c.cqByID
	c.qpByID, c.cqByID = map[uint64]*QP{}, map[uint64]*CQ{}
	c.mu.Unlock()
	for _, q := range qps {
		q.mu.Lock()
		if !q.dead.Load() {
			q.state.Store(uint32(verbs.QPStateReset))
			q.dead.Store(true)
			q.mem.Free()
			q.dbMem.Free()
		}
		q.mu.Unlock()
	}
	for _, cq := range cqs {
		if !cq.dead.Swap(true) {
			cq.mem.Free()
			cq.dbMem.Free()
		}
	}
	return err
}

// Name is the device name.
func (c *Context) Name() string { return c.name }

// Info is what discovery reported for the device.
func (c *Context) Info() uverbs.DeviceInfo { return c.info }

// File is the underlying command file (for tests and tools that issue raw commands).
func (c *Context) File() uverbs.File { return c.f }

// QueryDevice is ibv_query_device (the extended command, or the legacy one on kernels
// without it).
func (c *Context) QueryDevice() (verbs.DeviceAttr, error) {
	r, err := uverbs.QueryDeviceAny(c.f)
	if err != nil {
		return verbs.DeviceAttr{}, opError("query device", err)
	}
	b := r.Base
	return verbs.DeviceAttr{FWVer: b.Fw_ver, NodeGUID: b.Node_guid, SysImageGUID: b.Sys_image_guid,
		MaxMRSize: b.Max_mr_size, PageSizeCap: b.Page_size_cap, VendorID: b.Vendor_id,
		VendorPartID: b.Vendor_part_id, HWVer: b.Hw_ver, MaxQP: b.Max_qp, MaxQPWR: b.Max_qp_wr,
		DeviceCapFlags: b.Device_cap_flags, MaxSGE: b.Max_sge, MaxSGERd: b.Max_sge_rd,
		MaxCQ: b.Max_cq, MaxCQE: b.Max_cqe, MaxMR: b.Max_mr, MaxPD: b.Max_pd,
		MaxQPRdAtom: b.Max_qp_rd_atom, MaxEERdAtom: b.Max_ee_rd_atom, MaxResRdAtom: b.Max_res_rd_atom,
		MaxQPInitRdAtom: b.Max_qp_init_rd_atom, MaxEEInitRdAtom: b.Max_ee_init_rd_atom,
		AtomicCap: b.Atomic_cap, MaxEE: b.Max_ee, MaxRDD: b.Max_rdd, MaxMW: b.Max_mw,
		MaxRawIPv6QP: b.Max_raw_ipv6_qp, MaxRawEthyQP: b.Max_raw_ethy_qp, MaxMcastGrp: b.Max_mcast_grp,
		MaxMcastQPAttach: b.Max_mcast_qp_attach, MaxTotalMcastQPAttach: b.Max_total_mcast_qp_attach,
		MaxAH: b.Max_ah, MaxFMR: b.Max_fmr, MaxMapPerFMR: b.Max_map_per_fmr, MaxSRQ: b.Max_srq,
		MaxSRQWR: b.Max_srq_wr, MaxSRQSGE: b.Max_srq_sge, MaxPkeys: b.Max_pkeys,
		LocalCAAckDelay: b.Local_ca_ack_delay, PhysPortCnt: b.Phys_port_cnt,
		CompletionTimestampMax: r.Timestamp_mask, HCACoreClock: r.Hca_core_clock,
		DeviceCapFlagsEx: r.Device_cap_flags_ex}, nil
}

// QueryPort is ibv_query_port.
func (c *Context) QueryPort(port uint8) (verbs.PortAttr, error) {
	r, err := viaIoctl(&c.cmds, cmdQueryPort,
		func() (uverbs.QueryPortRespEx, error) { return uverbs.QueryPort(c.f, uverbs.DriverIDMLX5, port) },
		func() (uverbs.QueryPortRespEx, error) {
			l, err := uverbs.QueryPortWrite(c.f, port)
			return uverbs.QueryPortRespEx{Legacy_resp: l}, err
		})
	if err != nil {
		return verbs.PortAttr{}, opError(fmt.Sprintf("query port %d", port), err)
	}
	l := r.Legacy_resp
	return verbs.PortAttr{State: verbs.PortState(l.State), MaxMTU: l.Max_mtu, ActiveMTU: l.Active_mtu,
		GIDTblLen: l.Gid_tbl_len, PortCapFlags: l.Port_cap_flags, MaxMsgSize: l.Max_msg_sz,
		BadPkeyCntr: l.Bad_pkey_cntr, QkeyViolCntr: l.Qkey_viol_cntr, PkeyTblLen: l.Pkey_tbl_len,
		LID: l.Lid, SMLID: l.Sm_lid, LMC: l.Lmc, MaxVLNum: l.Max_vl_num, SMSL: l.Sm_sl,
		SubnetTimeout: l.Subnet_timeout, InitTypeReply: l.Init_type_reply, ActiveWidth: l.Active_width,
		ActiveSpeed: l.Active_speed, PhysState: l.Phys_state, LinkLayer: l.Link_layer, Flags: l.Flags,
		PortCapFlags2: r.Port_cap_flags2}, nil
}

// gidTypeRoCEv2 is IB_UVERBS_GID_TYPE_ROCE_V2.
const gidTypeRoCEv2 = 2

// GIDs returns the populated GID table of every port, from the QUERY_GID_TABLE ioctl, or
// from sysfs where the ioctl is missing.
func (c *Context) GIDs() ([]verbs.GID, error) {
	es, err := uverbs.QueryGIDTable(c.f, uverbs.DriverIDMLX5, 256)
	if err != nil {
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOTTY) && !errors.Is(err, unix.EPROTONOSUPPORT) {
			return nil, opError("query GID table", err)
		}
		es = nil
		for _, p := range c.info.Ports {
			es = append(es, uverbs.GIDEntriesFromSysfs(p, nil)...)
		}
	}
	out := make([]verbs.GID, 0, len(es))
	for _, e := range es {
		out = append(out, verbs.GID{Index: int(e.Gid_index), Port: uint8(e.Port_num), GID: e.GIDBytes(), RoCEv2: e.Gid_type == gidTypeRoCEv2})
	}
	return out, nil
}

// GIDByIndex returns GID index idx of port.
func (c *Context) GIDByIndex(port uint8, idx int) (verbs.GID, error) {
	gs, err := c.GIDs()
	if err != nil {
		return verbs.GID{}, err
	}
	if g, ok := verbs.FindGID(gs, port, idx); ok {
		return g, nil
	}
	return verbs.GID{}, fmt.Errorf("provider: GID %d of port %d: %w", idx, port, verbs.ErrNotFound)
}

// SourceGID is GID index idx of port, or, when idx is negative, the port's preferred GID
// (verbs.PreferredGID: the RoCE v2 GID of an IPv4 address; on a ConnectX index 0 is the
// RoCE v1 link-local GID).
func (c *Context) SourceGID(port uint8, idx int) (verbs.GID, error) {
	if idx >= 0 {
		return c.GIDByIndex(port, idx)
	}
	gs, err := c.GIDs()
	if err != nil {
		return verbs.GID{}, err
	}
	g, ok := verbs.PreferredGID(gs, port)
	if !ok {
		return verbs.GID{}, fmt.Errorf("provider: no GID on port %d: %w", port, verbs.ErrNotFound)
	}
	return g, nil
}

// GIDByIP returns the RoCEv2 GID of port that carries ip (IPv4 GIDs are IPv4-mapped), the way
// perftest and NCCL pick the GID index for an address.
func (c *Context) GIDByIP(port uint8, ip net.IP) (verbs.GID, error) {
	gs, err := c.GIDs()
	if err != nil {
		return verbs.GID{}, err
	}
	if g, ok := verbs.FindGIDByIP(gs, port, ip); ok {
		return g, nil
	}
	return verbs.GID{}, fmt.Errorf("provider: RoCEv2 GID for %v on port %d: %w", ip, port, verbs.ErrNotFound)
}

// NumCompVectors is the number of completion vectors the kernel reported
// (ibv_context.num_comp_vectors).
func (c *Context) NumCompVectors() int { return int(c.numCompV) }

// AsyncFD is the context's async event descriptor (ibv_context.async_fd). It is non-blocking;
// GetAsyncEvent polls it before reading.
func (c *Context) AsyncFD() int { return c.asyncFD }

// bfreg returns the BlueFlame register with gross index i, creating its handle once: QPs that
// share a bfreg share its alternating-halves state, as libmlx5's bfs[] table does.
func (c *Context) bfreg(i uint32) (*mlx5.BFReg, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.bfs[i]; r != nil {
		return r, nil
	}
	loc, err := c.layout.Locate(i)
	if err != nil {
		return nil, err
	}
	if loc.SysPage >= len(c.uars) {
		return nil, fmt.Errorf("bfreg %d on unmapped page %d: %w", i, loc.SysPage, verbs.ErrInvalidArgument)
	}
	r, err := mlx5.NewBFReg(c.uars[loc.SysPage], loc)
	if err != nil {
		return nil, err
	}
	r.NeedLock = needBfregLock(i, c.layout.TotBfregs, c.layout.LowLatencyBfregs)
	c.bfs[i] = r
	return r, nil
}

// needBfregLock is libmlx5's need_uuar_lock: bfreg 0 (no BlueFlame) and the low-latency
// bfregs (each given to one QP) are rung without a lock; the medium ones are shared between
// QPs and serialise their doorbells.
func needBfregLock(gross uint32, tot, lowLat int) bool {
	if gross == 0 {
		return false
	}
	i := int(gross/2 + gross%2)
	return i < tot-lowLat
}

func (c *Context) newID() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	return c.nextID
}

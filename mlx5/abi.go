package mlx5

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// mlx5 driver data (rdma/mlx5-abi.h): the bytes libmlx5 puts in the UHW_IN attribute (or
// after the legacy command struct) and the kernel's mlx5_ib returns in UHW_OUT. They are in
// host byte order, unlike the PRM formats. Each type has Put (encode, writes Size bytes) and a
// Decode function that accepts what the kernel accepts: a prefix at least the minimum length
// older libraries send (missing fields read as zero) and ignores trailing bytes.

var ne = binary.NativeEndian

// ABIVersion is MLX5_IB_UVERBS_ABI_VERSION.
const ABIVersion = 1

// Library capability bits of AllocUcontextReqV2.LibCaps (enum mlx5_lib_caps).
const (
	LibCap4KUAR  = 1 << 0 // MLX5_LIB_CAP_4K_UAR
	LibCapDynUAR = 1 << 1 // MLX5_LIB_CAP_DYN_UAR
)

// AllocUctxDEVX is the AllocUcontextReqV2.Flags bit asking for a DEVX context
// (MLX5_IB_ALLOC_UCTX_DEVX, enum mlx5_ib_alloc_uctx_v2_flags).
const AllocUctxDEVX = 1 << 0

// AllocUcontextReqV2 is struct mlx5_ib_alloc_ucontext_req_v2.
type AllocUcontextReqV2 struct {
	TotalNumBfregs      uint32 // 0
	NumLowLatencyBfregs uint32 // 4
	Flags               uint32 // 8
	CompMask            uint32 // 12
	MaxCQEVersion       uint8  // 16
	LibCaps             uint64 // 24
}

// AllocUcontextReqV2Size is sizeof(struct mlx5_ib_alloc_ucontext_req_v2);
// AllocUcontextReqMinSize is sizeof(struct mlx5_ib_alloc_ucontext_req), the v0 request;
// AllocUcontextReqMinV2Size is offsetof(max_cqe_version), the shortest v2 request.
const (
	AllocUcontextReqV2Size    = 32
	AllocUcontextReqMinSize   = 8
	AllocUcontextReqMinV2Size = 16
)

// Put encodes r into b[0:32].
func (r *AllocUcontextReqV2) Put(b []byte) {
	_ = b[AllocUcontextReqV2Size-1]
	clear(b[:AllocUcontextReqV2Size])
	ne.PutUint32(b[0:], r.TotalNumBfregs)
	ne.PutUint32(b[4:], r.NumLowLatencyBfregs)
	ne.PutUint32(b[8:], r.Flags)
	ne.PutUint32(b[12:], r.CompMask)
	b[16] = r.MaxCQEVersion
	ne.PutUint64(b[24:], r.LibCaps)
}

// DecodeAllocUcontextReq decodes a v0 or v2 request as mlx5_ib_alloc_ucontext does: exactly
// 8 bytes or at least 16 (EINVAL otherwise), reserved bytes zero (EOPNOTSUPP otherwise).
func DecodeAllocUcontextReq(b []byte) (AllocUcontextReqV2, error) {
	const op = "decode mlx5 alloc_ucontext req"
	var r AllocUcontextReqV2
	if len(b) != AllocUcontextReqMinSize && len(b) < AllocUcontextReqMinV2Size {
		return r, shortErr(op, len(b), AllocUcontextReqMinV2Size)
	}
	var f [AllocUcontextReqV2Size]byte
	copy(f[:], b)
	if f[17] != 0 || ne.Uint16(f[18:]) != 0 || ne.Uint32(f[20:]) != 0 {
		return r, newErr(op, ErrMalformed, unix.EOPNOTSUPP, "reserved bytes set")
	}
	r.TotalNumBfregs = ne.Uint32(f[0:])
	r.NumLowLatencyBfregs = ne.Uint32(f[4:])
	r.Flags = ne.Uint32(f[8:])
	r.CompMask = ne.Uint32(f[12:])
	r.MaxCQEVersion = f[16]
	r.LibCaps = ne.Uint64(f[24:])
	return r, nil
}

// AllocUcontextResp is struct mlx5_ib_alloc_ucontext_resp.
type AllocUcontextResp struct {
	QPTabSize          uint32 // 0
	BfRegSize          uint32 // 4
	TotBfregs          uint32 // 8
	CacheLineSize      uint32 // 12
	MaxSQDescSz        uint16 // 16
	MaxRQDescSz        uint16 // 18
	MaxSendWQEBB       uint32 // 20
	MaxRecvWR          uint32 // 24
	MaxSRQRecvWR       uint32 // 28
	NumPorts           uint16 // 32
	FlowActionFlags    uint16 // 34
	CompMask           uint32 // 36
	ResponseLength     uint32 // 40
	CQEVersion         uint8  // 44
	CmdsSuppUHW        uint8  // 45
	EthMinInline       uint8  // 46
	ClockInfoVersions  uint8  // 47
	HCACoreClockOffset uint64 // 48
	LogUARSize         uint32 // 56
	NumUARsPerPage     uint32 // 60
	NumDynBfregs       uint32 // 64
	DumpFillMkey       uint32 // 68
}

// AllocUcontextRespSize is sizeof(struct mlx5_ib_alloc_ucontext_resp);
// AllocUcontextRespMinSize is offsetof(cqe_version), the response of the oldest kernels.
const (
	AllocUcontextRespSize    = 72
	AllocUcontextRespMinSize = 44
)

// Put encodes r into b[0:72].
func (r *AllocUcontextResp) Put(b []byte) {
	_ = b[AllocUcontextRespSize-1]
	ne.PutUint32(b[0:], r.QPTabSize)
	ne.PutUint32(b[4:], r.BfRegSize)
	ne.PutUint32(b[8:], r.TotBfregs)
	ne.PutUint32(b[12:], r.CacheLineSize)
	ne.PutUint16(b[16:], r.MaxSQDescSz)
	ne.PutUint16(b[18:], r.MaxRQDescSz)
	ne.PutUint32(b[20:], r.MaxSendWQEBB)
	ne.PutUint32(b[24:], r.MaxRecvWR)
	ne.PutUint32(b[28:], r.MaxSRQRecvWR)
	ne.PutUint16(b[32:], r.NumPorts)
	ne.PutUint16(b[34:], r.FlowActionFlags)
	ne.PutUint32(b[36:], r.CompMask)
	ne.PutUint32(b[40:], r.ResponseLength)
	b[44] = r.CQEVersion
	b[45] = r.CmdsSuppUHW
	b[46] = r.EthMinInline
	b[47] = r.ClockInfoVersions
	ne.PutUint64(b[48:], r.HCACoreClockOffset)
	ne.PutUint32(b[56:], r.LogUARSize)
	ne.PutUint32(b[60:], r.NumUARsPerPage)
	ne.PutUint32(b[64:], r.NumDynBfregs)
	ne.PutUint32(b[68:], r.DumpFillMkey)
}

// DecodeAllocUcontextResp decodes a response; fields beyond len(b) read as zero, which is what
// rdma-core sees from an older kernel (adjust_uar_info then falls back to one UAR per page).
func DecodeAllocUcontextResp(b []byte) (AllocUcontextResp, error) {
	var r AllocUcontextResp
	if len(b) < AllocUcontextRespMinSize {
		return r, shortErr("decode mlx5 alloc_ucontext resp", len(b), AllocUcontextRespMinSize)
	}
	var f [AllocUcontextRespSize]byte
	copy(f[:], b)
	r.QPTabSize = ne.Uint32(f[0:])
	r.BfRegSize = ne.Uint32(f[4:])
	r.TotBfregs = ne.Uint32(f[8:])
	r.CacheLineSize = ne.Uint32(f[12:])
	r.MaxSQDescSz = ne.Uint16(f[16:])
	r.MaxRQDescSz = ne.Uint16(f[18:])
	r.MaxSendWQEBB = ne.Uint32(f[20:])
	r.MaxRecvWR = ne.Uint32(f[24:])
	r.MaxSRQRecvWR = ne.Uint32(f[28:])
	r.NumPorts = ne.Uint16(f[32:])
	r.FlowActionFlags = ne.Uint16(f[34:])
	r.CompMask = ne.Uint32(f[36:])
	r.ResponseLength = ne.Uint32(f[40:])
	r.CQEVersion = f[44]
	r.CmdsSuppUHW = f[45]
	r.EthMinInline = f[46]
	r.ClockInfoVersions = f[47]
	r.HCACoreClockOffset = ne.Uint64(f[48:])
	r.LogUARSize = ne.Uint32(f[56:])
	r.NumUARsPerPage = ne.Uint32(f[60:])
	r.NumDynBfregs = ne.Uint32(f[64:])
	r.DumpFillMkey = ne.Uint32(f[68:])
	return r, nil
}

// CreateCQ flags (enum mlx5_ib_create_cq_flags).
const (
	CreateCQFlagCQE128BPad   = 1 << 0 // MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD
	CreateCQFlagUARPageIndex = 1 << 1 // MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX
	CreateCQFlagRealTimeTS   = 1 << 2 // MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS
)

// CreateCQ is struct mlx5_ib_create_cq.
type CreateCQ struct {
	BufAddr          uint64 // 0: CQ buffer (user virtual address)
	DBAddr           uint64 // 8: doorbell record (set_ci, arm)
	CQESize          uint32 // 16: 64 or 128
	CQECompEn        uint8  // 20
	CQECompResFormat uint8  // 21
	Flags            uint16 // 22
	UARPageIndex     uint16 // 24
}

// CreateCQSize is sizeof(struct mlx5_ib_create_cq); CreateCQMinSize is offsetof(flags), the
// shortest request mlx5_ib accepts.
const (
	CreateCQSize    = 32
	CreateCQMinSize = 22
)

// Put encodes c into b[0:32].
func (c *CreateCQ) Put(b []byte) {
	_ = b[CreateCQSize-1]
	clear(b[:CreateCQSize])
	ne.PutUint64(b[0:], c.BufAddr)
	ne.PutUint64(b[8:], c.DBAddr)
	ne.PutUint32(b[16:], c.CQESize)
	b[20] = c.CQECompEn
	b[21] = c.CQECompResFormat
	ne.PutUint16(b[22:], c.Flags)
	ne.PutUint16(b[24:], c.UARPageIndex)
}

// DecodeCreateCQ decodes the create_cq driver data as create_cq_user does: at least
// offsetof(flags) bytes (EINVAL), reserved0 and reserved1 zero (EINVAL).
func DecodeCreateCQ(b []byte) (CreateCQ, error) {
	const op = "decode mlx5 create_cq"
	var c CreateCQ
	if len(b) < CreateCQMinSize {
		return c, shortErr(op, len(b), CreateCQMinSize)
	}
	var f [CreateCQSize]byte
	copy(f[:], b)
	if ne.Uint16(f[26:]) != 0 || ne.Uint32(f[28:]) != 0 {
		return c, newErr(op, ErrMalformed, unix.EINVAL, "reserved bytes set")
	}
	c.BufAddr = ne.Uint64(f[0:])
	c.DBAddr = ne.Uint64(f[8:])
	c.CQESize = ne.Uint32(f[16:])
	c.CQECompEn = f[20]
	c.CQECompResFormat = f[21]
	c.Flags = ne.Uint16(f[22:])
	c.UARPageIndex = ne.Uint16(f[24:])
	return c, nil
}

// CreateCQResp is struct mlx5_ib_create_cq_resp.
type CreateCQResp struct {
	CQN uint32
}

// CreateCQRespSize is sizeof(struct mlx5_ib_create_cq_resp).
const CreateCQRespSize = 8

// Put encodes r into b[0:8].
func (r *CreateCQResp) Put(b []byte) {
	_ = b[CreateCQRespSize-1]
	ne.PutUint32(b[0:], r.CQN)
	ne.PutUint32(b[4:], 0)
}

// DecodeCreateCQResp decodes the create_cq response.
func DecodeCreateCQResp(b []byte) (CreateCQResp, error) {
	if len(b) < 4 {
		return CreateCQResp{}, shortErr("decode mlx5 create_cq resp", len(b), 4)
	}
	return CreateCQResp{CQN: ne.Uint32(b[0:])}, nil
}

// QP creation flags (enum in rdma/mlx5-abi.h).
const (
	QPFlagSignature    = 1 << 0  // MLX5_QP_FLAG_SIGNATURE
	QPFlagScatterCQE   = 1 << 1  // MLX5_QP_FLAG_SCATTER_CQE
	QPFlagBfregIndex   = 1 << 3  // MLX5_QP_FLAG_BFREG_INDEX: bfreg_index names a dynamic bfreg
	QPFlagUARPageIndex = 1 << 10 // MLX5_QP_FLAG_UAR_PAGE_INDEX
)

// InvalidBfreg is the bfreg_index create_qp answers for a QP that rings a UAR page the
// library allocated itself (MLX5_IB_INVALID_BFREG, mlx5_ib's internal value, BIT(31)).
const InvalidBfreg = 1 << 31

// The mlx5 driver's UAR object over RDMA_VERBS_IOCTL (rdma/mlx5_user_ioctl_cmds.h and
// mlx5_user_ioctl_verbs.h): the dynamic UAR pages libmlx5 allocates when its context was
// created with LibCapDynUAR. Driver-specific ids start at 1 << UVERBS_ID_NS_SHIFT.
const (
	ObjectUAR                 = 0x1008 // MLX5_IB_OBJECT_UAR
	MethodUARObjAlloc         = 0x1000 // MLX5_IB_METHOD_UAR_OBJ_ALLOC
	MethodUARObjDestroy       = 0x1001 // MLX5_IB_METHOD_UAR_OBJ_DESTROY
	AttrUARObjAllocHandle     = 0x1000 // MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE
	AttrUARObjAllocType       = 0x1001 // MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE
	AttrUARObjAllocMmapOffset = 0x1002 // MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET
	AttrUARObjAllocMmapLength = 0x1003 // MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH
	AttrUARObjAllocPageID     = 0x1004 // MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID
	AttrUARObjDestroyHandle   = 0x1000 // MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE
	UARAllocTypeBF            = 0      // MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF
	UARAllocTypeNC            = 1      // MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC
)

// CreateQP is struct mlx5_ib_create_qp.
type CreateQP struct {
	BufAddr    uint64 // 0: RQ then SQ in one buffer
	DBAddr     uint64 // 8: doorbell record (RcvDBR, SndDBR)
	SQWQECount uint32 // 16
	RQWQECount uint32 // 20
	RQWQEShift uint32 // 24: log2 of the receive WQE stride
	Flags      uint32 // 28
	UIdx       uint32 // 32: user index (CQE version 1)
	BfregIndex uint32 // 36
	SQBufAddr  uint64 // 40: union with access_key
	ECEOptions uint32 // 48
	// DCIStreams is struct mlx5_ib_create_qp_dci_streams {log_num_concurent, log_num_errored}.
	DCIStreams [2]uint8 // 52
}

// CreateQPSize is sizeof(struct mlx5_ib_create_qp); CreateQPMinSize is offsetof(ece_options),
// the shortest request mlx5_ib accepts (process_udata_size: libraries without ECE);
// createQPReservedOff is offsetof(reserved), from where check_ucmd_data wants zeros.
const (
	CreateQPSize        = 56
	CreateQPMinSize     = 48
	createQPReservedOff = 54
)

// Put encodes q into b[0:56].
func (q *CreateQP) Put(b []byte) {
	_ = b[CreateQPSize-1]
	clear(b[:CreateQPSize])
	ne.PutUint64(b[0:], q.BufAddr)
	ne.PutUint64(b[8:], q.DBAddr)
	ne.PutUint32(b[16:], q.SQWQECount)
	ne.PutUint32(b[20:], q.RQWQECount)
	ne.PutUint32(b[24:], q.RQWQEShift)
	ne.PutUint32(b[28:], q.Flags)
	ne.PutUint32(b[32:], q.UIdx)
	ne.PutUint32(b[36:], q.BfregIndex)
	ne.PutUint64(b[40:], q.SQBufAddr)
	ne.PutUint32(b[48:], q.ECEOptions)
	b[52], b[53] = q.DCIStreams[0], q.DCIStreams[1]
}

// DecodeCreateQP decodes the create_qp driver data of an RC/UC/UD QP as mlx5_ib does: at
// least offsetof(ece_options) bytes, and every byte from offsetof(reserved) to the end of the
// input zero (EINVAL otherwise, check_ucmd_data).
func DecodeCreateQP(b []byte) (CreateQP, error) {
	const op = "decode mlx5 create_qp"
	var q CreateQP
	if len(b) < CreateQPMinSize {
		return q, shortErr(op, len(b), CreateQPMinSize)
	}
	for _, x := range b[min(len(b), createQPReservedOff):] {
		if x != 0 {
			return q, newErr(op, ErrMalformed, unix.EINVAL, "bytes after offset %d not cleared", createQPReservedOff)
		}
	}
	var f [CreateQPSize]byte
	copy(f[:], b)
	q.BufAddr = ne.Uint64(f[0:])
	q.DBAddr = ne.Uint64(f[8:])
	q.SQWQECount = ne.Uint32(f[16:])
	q.RQWQECount = ne.Uint32(f[20:])
	q.RQWQEShift = ne.Uint32(f[24:])
	q.Flags = ne.Uint32(f[28:])
	q.UIdx = ne.Uint32(f[32:])
	q.BfregIndex = ne.Uint32(f[36:])
	q.SQBufAddr = ne.Uint64(f[40:])
	q.ECEOptions = ne.Uint32(f[48:])
	q.DCIStreams = [2]uint8{f[52], f[53]}
	return q, nil
}

// CreateQPResp is struct mlx5_ib_create_qp_resp.
type CreateQPResp struct {
	BfregIndex uint32 // 0: gross bfreg index (see BfregIndexFromKernel)
	ECEOptions uint32 // 4
	CompMask   uint32 // 8
	TIRN       uint32 // 12
	TISN       uint32 // 16
	RQN        uint32 // 20
	SQN        uint32 // 24
	TIRICMAddr uint64 // 32
}

// CreateQPRespSize is sizeof(struct mlx5_ib_create_qp_resp); CreateQPRespMinSize covers
// bfreg_index alone, all that old kernels return.
const (
	CreateQPRespSize    = 40
	CreateQPRespMinSize = 4
)

// Put encodes r into b[0:40].
func (r *CreateQPResp) Put(b []byte) {
	_ = b[CreateQPRespSize-1]
	clear(b[:CreateQPRespSize])
	ne.PutUint32(b[0:], r.BfregIndex)
	ne.PutUint32(b[4:], r.ECEOptions)
	ne.PutUint32(b[8:], r.CompMask)
	ne.PutUint32(b[12:], r.TIRN)
	ne.PutUint32(b[16:], r.TISN)
	ne.PutUint32(b[20:], r.RQN)
	ne.PutUint32(b[24:], r.SQN)
	ne.PutUint64(b[32:], r.TIRICMAddr)
}

// DecodeCreateQPResp decodes the create_qp response.
func DecodeCreateQPResp(b []byte) (CreateQPResp, error) {
	var r CreateQPResp
	if len(b) < CreateQPRespMinSize {
		return r, shortErr("decode mlx5 create_qp resp", len(b), CreateQPRespMinSize)
	}
	var f [CreateQPRespSize]byte
	copy(f[:], b)
	r.BfregIndex = ne.Uint32(f[0:])
	r.ECEOptions = ne.Uint32(f[4:])
	r.CompMask = ne.Uint32(f[8:])
	r.TIRN = ne.Uint32(f[12:])
	r.TISN = ne.Uint32(f[16:])
	r.RQN = ne.Uint32(f[20:])
	r.SQN = ne.Uint32(f[24:])
	r.TIRICMAddr = ne.Uint64(f[32:])
	return r, nil
}

package mlx5

// Constants of the mlx5 Programmer's Reference Manual as <infiniband/mlx5dv.h> (rdma-core,
// providers/mlx5/mlx5dv.h) publishes them. The oracle tests compare every value with the header.

// Opcode is the 8-bit opcode of a send WQE (low byte of opmod_idx_opcode in the control
// segment); the same value comes back in the top byte of sop_drop_qpn of a requester CQE.
type Opcode uint8

// Send WQE opcodes (enum MLX5_OPCODE_* in mlx5dv.h).
const (
	OpcodeNOP          Opcode = 0x00 // MLX5_OPCODE_NOP
	OpcodeSendInval    Opcode = 0x01 // MLX5_OPCODE_SEND_INVAL
	OpcodeRDMAWrite    Opcode = 0x08 // MLX5_OPCODE_RDMA_WRITE
	OpcodeRDMAWriteImm Opcode = 0x09 // MLX5_OPCODE_RDMA_WRITE_IMM
	OpcodeSend         Opcode = 0x0a // MLX5_OPCODE_SEND
	OpcodeSendImm      Opcode = 0x0b // MLX5_OPCODE_SEND_IMM
	OpcodeRDMARead     Opcode = 0x10 // MLX5_OPCODE_RDMA_READ
	OpcodeAtomicCS     Opcode = 0x11 // MLX5_OPCODE_ATOMIC_CS
	OpcodeAtomicFA     Opcode = 0x12 // MLX5_OPCODE_ATOMIC_FA
)

// String names the opcode as the PRM does.
func (o Opcode) String() string {
	switch o {
	case OpcodeNOP:
		return "NOP"
	case OpcodeSendInval:
		return "SEND_INVAL"
	case OpcodeRDMAWrite:
		return "RDMA_WRITE"
	case OpcodeRDMAWriteImm:
		return "RDMA_WRITE_IMM"
	case OpcodeSend:
		return "SEND"
	case OpcodeSendImm:
		return "SEND_IMM"
	case OpcodeRDMARead:
		return "RDMA_READ"
	case OpcodeAtomicCS:
		return "ATOMIC_CS"
	case OpcodeAtomicFA:
		return "ATOMIC_FA"
	}
	return "OPCODE_" + hex8(uint8(o))
}

// Segments returns which segments follow the control segment for an RC WQE with this opcode,
// in the order _mlx5_post_send lays them out: a remote-address segment for RDMA and atomic
// opcodes, an atomic segment for atomics. Unknown opcodes report ok=false.
func (o Opcode) Segments() (raddr, atomic, ok bool) {
	switch o {
	case OpcodeNOP, OpcodeSend, OpcodeSendImm, OpcodeSendInval:
		return false, false, true
	case OpcodeRDMAWrite, OpcodeRDMAWriteImm, OpcodeRDMARead:
		return true, false, true
	case OpcodeAtomicCS, OpcodeAtomicFA:
		return true, true, true
	}
	return false, false, false
}

// Control segment fm_ce_se bits (enum MLX5_WQE_CTRL_* in mlx5dv.h). Bits 7..5 are the fence
// mode, bits 3..2 the completion mode, bit 1 the solicited-event request.
const (
	CtrlCQUpdate            uint8 = 2 << 2 // MLX5_WQE_CTRL_CQ_UPDATE: generate a CQE (signaled)
	CtrlSolicited           uint8 = 1 << 1 // MLX5_WQE_CTRL_SOLICITED
	CtrlFence               uint8 = 4 << 5 // MLX5_WQE_CTRL_FENCE: wait for prior RDMA READ/atomics
	CtrlInitiatorSmallFence uint8 = 1 << 5 // MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE (after local inval/bind)
	CtrlFenceMask           uint8 = 7 << 5 // fence mode field
	CtrlCEMask              uint8 = 3 << 2 // completion mode field
)

// WQE geometry.
const (
	SendWQEBB    = 64         // MLX5_SEND_WQE_BB: a send WQE basic block is 64 bytes
	SendWQEShift = 6          // MLX5_SEND_WQE_SHIFT
	SegSize      = 16         // the DS unit: every segment is a multiple of 16 bytes
	InlineSeg    = 0x80000000 // MLX5_INLINE_SEG: set in byte_count of an inline data segment
	InvalidLKey  = 0x100      // MLX5_INVALID_LKEY: terminates a receive WQE's scatter list
	// MaxDS is the largest DS the 6-bit field of qpn_ds can carry (rdma-core masks with 0x3f).
	MaxDS = 0x3f
)

// CQE opcodes (high nibble of op_own; enum MLX5_CQE_* in mlx5dv.h).
const (
	CQEReq         uint8 = 0  // MLX5_CQE_REQ: requester completion
	CQERespWrImm   uint8 = 1  // MLX5_CQE_RESP_WR_IMM: RDMA WRITE with immediate consumed a receive
	CQERespSend    uint8 = 2  // MLX5_CQE_RESP_SEND
	CQERespSendImm uint8 = 3  // MLX5_CQE_RESP_SEND_IMM
	CQERespSendInv uint8 = 4  // MLX5_CQE_RESP_SEND_INV
	CQEResizeCQ    uint8 = 5  // MLX5_CQE_RESIZE_CQ
	CQENoPacket    uint8 = 6  // MLX5_CQE_NO_PACKET
	CQESigErr      uint8 = 12 // MLX5_CQE_SIG_ERR
	CQEReqErr      uint8 = 13 // MLX5_CQE_REQ_ERR
	CQERespErr     uint8 = 14 // MLX5_CQE_RESP_ERR
	CQEInvalid     uint8 = 15 // MLX5_CQE_INVALID: how software initialises a fresh CQ buffer
	CQEOwnerMask   uint8 = 1  // MLX5_CQE_OWNER_MASK
	// CQEInlineScatter32 and CQEInlineScatter64 are op_own bits telling that the data of a
	// small receive (or READ/atomic response) was scattered into the CQE itself.
	CQEInlineScatter32 uint8 = 0x4 // MLX5_INLINE_SCATTER_32
	CQEInlineScatter64 uint8 = 0x8 // MLX5_INLINE_SCATTER_64
)

// Error CQE syndromes (enum MLX5_CQE_SYNDROME_* in mlx5dv.h).
const (
	SyndromeLocalLengthErr     uint8 = 0x01
	SyndromeLocalQPOpErr       uint8 = 0x02
	SyndromeLocalProtErr       uint8 = 0x04
	SyndromeWRFlushErr         uint8 = 0x05
	SyndromeMWBindErr          uint8 = 0x06
	SyndromeBadRespErr         uint8 = 0x10
	SyndromeLocalAccessErr     uint8 = 0x11
	SyndromeRemoteInvalReqErr  uint8 = 0x12
	SyndromeRemoteAccessErr    uint8 = 0x13
	SyndromeRemoteOpErr        uint8 = 0x14
	SyndromeTransportRetryExc  uint8 = 0x15
	SyndromeRNRRetryExc        uint8 = 0x16
	SyndromeRemoteAbortedErr   uint8 = 0x22
	VendorSyndromeODPPageFault uint8 = 0x93 // MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT
)

// Doorbell record word indexes (enum MLX5_RCV_DBR/MLX5_SND_DBR in mlx5dv.h and
// MLX5_CQ_SET_CI/MLX5_CQ_ARM_DB in providers/mlx5/mlx5.h). A doorbell record is two
// big-endian 32-bit words in host memory the NIC reads by DMA.
const (
	RcvDBR  = 0 // QP: receive counter (rq head & 0xffff)
	SndDBR  = 1 // QP: send counter (sq cur_post & 0xffff)
	CQSetCI = 0 // CQ: consumer index & 0xffffff
	CQArmDB = 1 // CQ: sn<<28 | cmd | ci
	// DBRecSize is the size of one doorbell record.
	DBRecSize = 8
)

// CQ doorbell (enum MLX5_CQ_DOORBELL, MLX5_CQ_DB_REQ_NOT* in mlx5dv.h).
const (
	CQDoorbell      = 0x20    // offset of the CQ arm doorbell inside a UAR page
	CQDBReqNotSol   = 1 << 24 // arm for the next solicited (or error) completion
	CQDBReqNot      = 0 << 24 // arm for the next completion
	CQDBCmdMask     = 3 << 24
	CQDBSeqShift    = 28
	CQDBCIMask      = 0xffffff
	CQDBSeqMask     = 3
	wqeCounterMask  = 0xffff
	qpnMask         = 0xffffff
	cqeOwnerByteOff = 63
)

const hexDigits = "0123456789abcdef"

func hex8(v uint8) string {
	return string([]byte{'0', 'x', hexDigits[v>>4], hexDigits[v&0xf]})
}

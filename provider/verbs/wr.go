package verbs

// WROpcode is a send work request opcode, numbered as enum ibv_wr_opcode.
type WROpcode uint32

// Send opcodes of RC QPs.
const (
	WRRDMAWrite        WROpcode = 0 // IBV_WR_RDMA_WRITE
	WRRDMAWriteWithImm WROpcode = 1 // IBV_WR_RDMA_WRITE_WITH_IMM
	WRSend             WROpcode = 2 // IBV_WR_SEND
	WRSendWithImm      WROpcode = 3 // IBV_WR_SEND_WITH_IMM
	WRRDMARead         WROpcode = 4 // IBV_WR_RDMA_READ
	WRAtomicCmpAndSwp  WROpcode = 5 // IBV_WR_ATOMIC_CMP_AND_SWP
	WRAtomicFetchAdd   WROpcode = 6 // IBV_WR_ATOMIC_FETCH_AND_ADD
)

var wrOpcodeNames = [...]string{"RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM",
	"RDMA_READ", "ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD"}

func (o WROpcode) String() string {
	if int(o) < len(wrOpcodeNames) {
		return wrOpcodeNames[o]
	}
	return "WR_OPCODE_UNKNOWN"
}

// TwoSided reports whether the opcode consumes a receive WQE at the responder (SEND,
// SEND_WITH_IMM, RDMA_WRITE_WITH_IMM).
func (o WROpcode) TwoSided() bool {
	return o == WRSend || o == WRSendWithImm || o == WRRDMAWriteWithImm
}

// Atomic reports whether the opcode is an atomic (executed once at the responder, never
// safely retried by anyone but the responder itself).
func (o WROpcode) Atomic() bool { return o == WRAtomicCmpAndSwp || o == WRAtomicFetchAdd }

// SendFlags are enum ibv_send_flags.
type SendFlags uint32

// Send flags.
const (
	SendFence     SendFlags = 1 << 0 // IBV_SEND_FENCE: wait for prior READs/atomics
	SendSignaled  SendFlags = 1 << 1 // IBV_SEND_SIGNALED: produce a CQE on success
	SendSolicited SendFlags = 1 << 2 // IBV_SEND_SOLICITED: set the SE bit
	SendInline    SendFlags = 1 << 3 // IBV_SEND_INLINE: copy the payload into the WQE
)

// SGE is struct ibv_sge: a local buffer inside a registered MR. Addr is a virtual address in
// this process (MR.Addr plus an offset).
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is struct ibv_send_wr for RC QPs. Lists are slices: PostSend(wrs) posts wrs[0..] with
// one doorbell. SGL is read during PostSend only; for SendInline the bytes at the SGE
// addresses are copied into the WQE and need not be registered.
type SendWR struct {
	WRID   uint64
	Opcode WROpcode
	Flags  SendFlags
	SGL    []SGE
	// Imm is the immediate data of *_WITH_IMM, in host order; it travels big-endian and
	// comes back in host order in the receiver's WC.Imm.
	Imm uint32
	// RemoteAddr and RKey address the peer's memory for RDMA and atomic opcodes.
	RemoteAddr uint64
	RKey       uint32
	// CompareAdd is the compare value of CMP_AND_SWP or the addend of FETCH_AND_ADD; Swap
	// is the swap value of CMP_AND_SWP.
	CompareAdd uint64
	Swap       uint64
}

// RecvWR is struct ibv_recv_wr: a receive buffer list for one incoming SEND or WRITE_WITH_IMM.
type RecvWR struct {
	WRID uint64
	SGL  []SGE
}

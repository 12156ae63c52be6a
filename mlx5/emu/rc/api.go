package rc

import (
	"errors"
	"net/netip"

	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// Op is the operation of a work request or of a receive completion.
type Op uint8

// Operations. OpSend, OpSendImm and OpWriteImm also appear in receive completions.
const (
	OpSend Op = iota + 1
	OpSendImm
	OpWrite
	OpWriteImm
	OpRead
	OpCompareSwap
	OpFetchAdd
)

// Status is a completion status. The values are those of enum ibv_wc_status
// (infiniband/verbs.h) so a NIC can map them to CQE syndromes with one table.
type Status uint8

// Completion statuses the engine produces.
const (
	StatusSuccess        Status = 0  // IBV_WC_SUCCESS
	StatusLocLenErr      Status = 1  // IBV_WC_LOC_LEN_ERR: receive buffer too small (responder)
	StatusLocQPOpErr     Status = 2  // IBV_WC_LOC_QP_OP_ERR: responder got an invalid request
	StatusLocAccessErr   Status = 8  // IBV_WC_LOC_ACCESS_ERR: responder refused a remote access
	StatusWRFlushErr     Status = 5  // IBV_WC_WR_FLUSH_ERR: flushed because the QP is in ERR
	StatusBadRespErr     Status = 7  // IBV_WC_BAD_RESP_ERR: unexpected response opcode or length
	StatusRemInvReqErr   Status = 9  // IBV_WC_REM_INV_REQ_ERR: NAK invalid request
	StatusRemAccessErr   Status = 10 // IBV_WC_REM_ACCESS_ERR: NAK remote access error
	StatusRemOpErr       Status = 11 // IBV_WC_REM_OP_ERR: NAK remote operational error
	StatusRetryExcErr    Status = 12 // IBV_WC_RETRY_EXC_ERR: retry_cnt exhausted
	StatusRNRRetryExcErr Status = 13 // IBV_WC_RNR_RETRY_EXC_ERR: rnr_retry exhausted
)

// Access is the set of remote operations a memory region or a QP allows.
type Access uint8

// Remote access rights (IBV_ACCESS_REMOTE_*).
const (
	AccessRemoteWrite Access = 1 << iota
	AccessRemoteRead
	AccessRemoteAtomic
)

// State is the transport state of a QP as the engine sees it (IBA QP states).
type State uint8

// QP states. The engine has no SQD/SQE: a send queue error moves the whole QP to StateError, as
// it does for RC.
const (
	StateReset State = iota
	StateInit
	StateRTR
	StateRTS
	StateError
)

// Sentinel errors returned by the QP's methods; wrapped with context.
var (
	// ErrState: the operation is not allowed in the QP's current state (EINVAL for the NIC).
	ErrState = errors.New("rc: operation not allowed in this QP state")
	// ErrConfig: a Config value is out of range (EINVAL for the NIC).
	ErrConfig = errors.New("rc: invalid QP attribute")
	// ErrClosed: the QP has been closed.
	ErrClosed = errors.New("rc: QP closed")
	// ErrAccess is what a Host returns from RemoteMemory when the rkey, range or rights do not
	// allow the access; any error from RemoteMemory is treated the same way.
	ErrAccess = errors.New("rc: remote access denied")
)

// Config holds the QP attributes the transport needs. Fields set at RTR (remote side, receive
// PSN, MTU, responder limits) and at RTS (send PSN, timers, retry counts, requester limits) all
// live here; the NIC passes the accumulated attributes on each Modify.
type Config struct {
	LocalQPN  uint32     // 24 bits
	RemoteQPN uint32     // dest_qp_num, 24 bits
	RemoteIP  netip.Addr // the remote port's GID as an IP address
	Link      roce.Link  // the local port's link; packets leave through it
	PKey      uint16     // BTH partition key; 0 means the default 0xffff

	PathMTU int    // payload bytes per packet: 256, 512, 1024, 2048 or 4096
	SQPSN   uint32 // first PSN the requester sends (sq_psn)
	RQPSN   uint32 // first PSN the responder expects (rq_psn)

	// Timeout is the local ACK timeout exponent: 4.096 µs × 2^Timeout; 0 means infinite.
	Timeout uint8
	// RetryCnt is how many times a packet is retransmitted after a timeout or a sequence
	// error before the WR fails with StatusRetryExcErr (0..7).
	RetryCnt uint8
	// RNRRetry is how many RNR NAKs are retried (0..6); 7 means infinite.
	RNRRetry uint8
	// MinRNRTimer is the IBA RNR timer code (0..31) the responder puts in its RNR NAKs.
	MinRNRTimer uint8
	// MaxRDAtomic bounds the requester's outstanding READ/atomic requests; 0 is treated as 1.
	MaxRDAtomic uint8
	// MaxDestRDAtomic is how many atomic results the responder keeps to replay for
	// retransmitted atomic requests; 0 is treated as 1.
	MaxDestRDAtomic uint8
	// RemoteAccess lists the remote operations this QP accepts as a responder
	// (qp_access_flags); others are NAKed with invalid request.
	RemoteAccess Access

	// Clock is the time source; nil means clock.Real.
	Clock clock.Clock
}

// WorkRequest is one send-queue work request, already validated by the NIC: lkeys resolved and
// bounds-checked into byte slices of registered memory.
type WorkRequest struct {
	Index uint16 // the WQE index (wqe_counter), returned in the completion
	Op    Op
	// Local is the gather list (SEND/WRITE: bytes to transmit, in order) or the scatter list
	// (READ: where response data lands; atomics: one 8-byte slice receiving the original
	// remote value, in host byte order). The engine keeps the slices until the WR completes.
	Local      [][]byte
	RemoteAddr uint64 // RDMA va for WRITE/READ/atomics
	RKey       uint32
	Imm        uint32 // immediate data for OpSendImm/OpWriteImm, host order
	Compare    uint64 // CompareSwap: compare value
	SwapAdd    uint64 // CompareSwap: swap value; FetchAdd: addend
	Signaled   bool   // reported back in the completion; the engine completes every WR
	Fence      bool   // wait for all earlier READ/atomic WRs to complete before starting
	Solicited  bool   // BTH SE bit on the last packet
}

// SendCompletion reports the end of a work request. Every posted WR produces exactly one, in
// posting order, whether it was signaled or not; the NIC decides which become CQEs.
type SendCompletion struct {
	Index    uint16
	Op       Op
	Status   Status
	ByteLen  uint32 // bytes transferred (READ: bytes read; atomics: 8)
	Signaled bool
}

// Recv is a posted receive handed to the engine by Host.PopRecv.
type Recv struct {
	Index   uint16   // the receive WQE index, returned in the completion
	Scatter [][]byte // where an incoming SEND lands, in order
}

// RecvCompletion reports the end of a receive: a SEND landed in it, a WRITE with immediate
// consumed it, or it was flushed.
type RecvCompletion struct {
	Index     uint16
	Op        Op // OpSend, OpSendImm or OpWriteImm (zero on flush)
	Status    Status
	ByteLen   uint32 // SEND: bytes placed; WRITE_IMM: the RDMA write length
	Imm       uint32
	HasImm    bool
	SrcQPN    uint32
	Solicited bool
}

// Host is what the NIC provides to the engine of one QP.
//
// RemoteMemory and PopRecv are called while the QP's lock is held: they must not call back into
// the QP. The completion callbacks are called without the lock, one at a time and in order, and
// may call Post, Modify or FlushRecv. Completions are delivered by whichever goroutine is
// delivering when they are produced: a call that produces completions (Post in ERR, Modify to
// ERR, HandlePacket) may return before they reach the Host, if another goroutine is delivering
// at that moment (that goroutine delivers them before it returns).
type Host interface {
	// RemoteMemory resolves an incoming request's rkey and range for the given access. It
	// returns the bytes (len == length) or an error when the rkey is unknown, the range falls
	// outside the region, or the region does not grant the access; the engine then NAKs with
	// remote access error.
	RemoteMemory(rkey uint32, va uint64, length int, access Access) ([]byte, error)
	// PopRecv dequeues the next posted receive; ok is false when none is posted (RNR).
	PopRecv() (r Recv, ok bool)
	// SendCompleted reports the completion of a send-queue WR.
	SendCompleted(c SendCompletion)
	// RecvCompleted reports the completion of a receive.
	RecvCompleted(c RecvCompletion)
	// QPError reports that the engine moved the QP to StateError by itself. status is the
	// cause: on the requester side the failing WR's status (RETRY_EXC, RNR_RETRY_EXC,
	// REM_ACCESS, REM_INV_REQ, REM_OP, BAD_RESP); on the responder side StatusLocAccessErr
	// (a refused rkey/range/right: IBV_EVENT_QP_ACCESS_ERR) or StatusLocQPOpErr /
	// StatusLocLenErr (an invalid request: IBV_EVENT_QP_REQ_ERR).
	QPError(status Status)
}

// Transport is the engine of one RC QP as the NIC drives it; *QP implements it. New creates
// one in StateReset.
type Transport interface {
	// Modify moves the QP to state to with the attributes in cfg, following the IBA
	// transitions (Reset→Init→RTR→RTS, RTS→RTS, any→Error, any→Reset). Entering StateError
	// flushes every outstanding WR with StatusWRFlushErr; entering StateReset forgets all
	// transport state. Errors wrap ErrState or ErrConfig.
	Modify(to State, cfg Config) error
	// Post queues a WR, called in doorbell order. Allowed in RTS (executed) and in Error
	// (completed at once with StatusWRFlushErr); in RTR/Init it wraps ErrState, and a
	// malformed WR (unknown op, atomic result list not 8 bytes) wraps ErrConfig. The engine
	// copies wr; it keeps the slices of wr.Local until the WR completes.
	Post(wr *WorkRequest) error
	// HandlePacket processes one packet addressed to this QP; the engine takes ownership.
	HandlePacket(p *roce.Packet)
	// FlushRecv completes every receive Host.PopRecv still yields with StatusWRFlushErr; it
	// does nothing unless the QP is in StateError. The NIC calls it after a QPError and after
	// receives are posted to a QP in error.
	FlushRecv()
	// State returns the current state (an atomic read).
	State() State
	// Close stops the QP's timers; later packets and posts are ignored. It does not complete
	// outstanding WRs (the NIC destroys the QP).
	Close() error
}

package rc

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// maxInflight bounds the PSNs the requester has sent but not seen acknowledged, so a large
// message is paced by ACKs instead of flooding the fabric's queues in one burst.
const maxInflight = 256

// ackEvery makes the requester ask for an ACK at least every this many packets of a long
// message, so the window keeps moving before the message's last packet.
const ackEvery = 64

// String names the state as the IBA does.
func (s State) String() string {
	switch s {
	case StateReset:
		return "RESET"
	case StateInit:
		return "INIT"
	case StateRTR:
		return "RTR"
	case StateRTS:
		return "RTS"
	case StateError:
		return "ERR"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// String names the operation.
func (o Op) String() string {
	switch o {
	case OpSend:
		return "SEND"
	case OpSendImm:
		return "SEND_IMM"
	case OpWrite:
		return "WRITE"
	case OpWriteImm:
		return "WRITE_IMM"
	case OpRead:
		return "READ"
	case OpCompareSwap:
		return "CMP_SWAP"
	case OpFetchAdd:
		return "FETCH_ADD"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

func (o Op) isReadAtomic() bool { return o == OpRead || o == OpCompareSwap || o == OpFetchAdd }
func (o Op) isAtomic() bool     { return o == OpCompareSwap || o == OpFetchAdd }

// Stats counts transport events of one QP; tests and shiftctl read them.
type Stats struct {
	PacketsSent     uint64 // every packet handed to the link, retransmissions included
	PacketsReceived uint64
	Retransmits     uint64 // go-back-N restarts (timeouts, sequence NAKs, RNR, implicit NAKs)
	Timeouts        uint64 // local ACK timer expiries
	SeqNAKsSent     uint64
	SeqNAKsReceived uint64
	RNRNAKsSent     uint64
	RNRNAKsReceived uint64
	Duplicates      uint64 // duplicate requests seen by the responder
	AtomicReplays   uint64 // atomic results replayed instead of re-executed
}

// sendWR is a posted WR and its transmission progress.
type sendWR struct {
	wr       WorkRequest
	length   int
	npkts    uint32 // PSNs the WR consumes
	firstPSN uint32
	started  bool   // PSNs assigned and first packet sent
	recvd    uint32 // READ: response packets received in order
	done     bool   // READ/atomic: all responses received
}

type eventKind uint8

const (
	evSend eventKind = iota
	evRecv
	evQPError
)

type event struct {
	kind eventKind
	sc   SendCompletion
	rc   RecvCompletion
	st   Status
}

// atomicResult is one entry of the responder's atomic replay buffer.
type atomicResult struct {
	psn   uint32
	orig  uint64
	valid bool
}

// QP is the RC engine of one queue pair. Its methods are safe for concurrent use: one mutex
// serialises posts, packets and timers; State is an atomic read.
type QP struct {
	host  Host
	state atomic.Uint32

	mu      sync.Mutex
	cfg     Config
	clk     clock.Clock
	mtu     int
	srcPort uint16
	closed  bool
	stats   Stats

	// Completion delivery: events are queued under mu and delivered without it.
	pending, spare []event
	delivering     bool

	// Requester.
	sq         []sendWR
	head       int    // oldest WR not completed
	cur        int    // WR being transmitted
	curPkt     uint32 // next packet of sq[cur]
	nextPSN    uint32 // PSN of the next packet to transmit
	sendHigh   uint32 // one past the highest PSN ever transmitted
	una        uint32 // oldest unacknowledged PSN
	rdOut      int    // READ/atomic WRs started and not done
	retries    uint8
	rnrRetries uint8
	rnrWait    bool
	recovering bool // a go-back-N for an out-of-order response is under way
	timeout    time.Duration
	deadline   time.Time
	ackTimer   clock.Timer
	rnrTimer   clock.Timer
	timerGen   uint64

	// Responder.
	ePSN     uint32
	msn      uint32
	nakSent  bool
	inSend   bool
	recv     Recv
	recvOff  int
	inWrite  bool
	wbuf     []byte
	woff     int
	atomics  []atomicResult
	atomicIx int
}

var _ Transport = (*QP)(nil)

// New returns the engine of one RC QP in StateReset; host serves its memory accesses and
// receives its completions.
func New(host Host) *QP {
	return &QP{host: host}
}

// State returns the current state.
func (q *QP) State() State { return State(q.state.Load()) }

func (q *QP) setState(s State) { q.state.Store(uint32(s)) }

// Stats returns a snapshot of the QP's counters.
func (q *QP) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stats
}

// Modify implements Transport.
func (q *QP) Modify(to State, cfg Config) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return fmt.Errorf("rc: modify QP to %v: %w", to, ErrClosed)
	}
	from := q.State()
	var err error
	switch {
	case to == StateReset:
		q.resetLocked()
	case to == StateError:
		if from != StateError {
			q.enterErrorLocked(StatusWRFlushErr, StatusWRFlushErr, false)
		}
	case to == StateInit && (from == StateReset || from == StateInit):
		q.cfg = cfg
		q.setState(StateInit)
	case to == StateRTR && from == StateInit:
		err = q.toRTRLocked(cfg)
	case to == StateRTS && (from == StateRTR || from == StateRTS):
		err = q.toRTSLocked(cfg, from == StateRTS)
	default:
		err = fmt.Errorf("rc: modify QP %#x from %v to %v: %w", cfg.LocalQPN, from, to, ErrState)
	}
	q.unlockAndDeliver()
	return err
}

func (q *QP) toRTRLocked(cfg Config) error {
	switch cfg.PathMTU {
	case 256, 512, 1024, 2048, 4096:
	default:
		return fmt.Errorf("rc: modify QP %#x to RTR: path MTU %d: %w", cfg.LocalQPN, cfg.PathMTU, ErrConfig)
	}
	if cfg.Link == nil || !cfg.RemoteIP.IsValid() {
		return fmt.Errorf("rc: modify QP %#x to RTR: no link or remote address: %w", cfg.LocalQPN, ErrConfig)
	}
	if cfg.MinRNRTimer > 31 || cfg.LocalQPN > psnMask || cfg.RemoteQPN > psnMask || cfg.RQPSN > psnMask {
		return fmt.Errorf("rc: modify QP %#x to RTR: attribute out of range: %w", cfg.LocalQPN, ErrConfig)
	}
	if cfg.PKey == 0 {
		cfg.PKey = 0xffff
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	q.cfg = cfg
	q.clk = cfg.Clock
	q.mtu = cfg.PathMTU
	// A fixed UDP source port per connection, as NICs derive it from the QPNs for ECMP entropy.
	q.srcPort = 0xc000 | uint16((cfg.LocalQPN^cfg.RemoteQPN)&0x3fff)
	q.ePSN = cfg.RQPSN
	q.msn = 0
	n := int(cfg.MaxDestRDAtomic)
	if n == 0 {
		n = 1
	}
	q.atomics = make([]atomicResult, n)
	q.atomicIx = 0
	q.setState(StateRTR)
	return nil
}

func (q *QP) toRTSLocked(cfg Config, again bool) error {
	if cfg.RetryCnt > 7 || cfg.RNRRetry > 7 || cfg.Timeout > 31 || cfg.MinRNRTimer > 31 || cfg.SQPSN > psnMask {
		return fmt.Errorf("rc: modify QP %#x to RTS: attribute out of range: %w", q.cfg.LocalQPN, ErrConfig)
	}
	q.cfg.Timeout = cfg.Timeout
	q.cfg.RetryCnt = cfg.RetryCnt
	q.cfg.RNRRetry = cfg.RNRRetry
	q.cfg.MinRNRTimer = cfg.MinRNRTimer
	q.timeout = ackTimeout(cfg.Timeout)
	q.retries = cfg.RetryCnt
	q.rnrRetries = cfg.RNRRetry
	if !again {
		q.cfg.SQPSN = cfg.SQPSN
		q.cfg.MaxRDAtomic = cfg.MaxRDAtomic
		q.nextPSN, q.sendHigh, q.una = cfg.SQPSN, cfg.SQPSN, cfg.SQPSN
	}
	q.setState(StateRTS)
	return nil
}

// resetLocked forgets all transport state, as a modify to RESET does. Outstanding WRs vanish
// without completions: the NIC resets its rings too.
func (q *QP) resetLocked() {
	q.stopTimersLocked()
	clear(q.sq)
	q.sq = q.sq[:0]
	q.head, q.cur, q.curPkt, q.rdOut = 0, 0, 0, 0
	q.rnrWait, q.recovering = false, false
	q.inSend, q.inWrite, q.nakSent = false, false, false
	q.recv, q.wbuf = Recv{}, nil
	q.pending = q.pending[:0]
	q.setState(StateReset)
}

func (q *QP) stopTimersLocked() {
	q.timerGen++
	if q.ackTimer != nil {
		q.ackTimer.Stop()
		q.ackTimer = nil
	}
	if q.rnrTimer != nil {
		q.rnrTimer.Stop()
		q.rnrTimer = nil
	}
}

// enterErrorLocked moves the QP to ERR: WRs not completed are flushed in order, after the
// first one completes with status first (the failing WR when the requester errs), and a
// receive a SEND was landing in is flushed. notify reports the transition to the host with
// cause.
func (q *QP) enterErrorLocked(first, cause Status, notify bool) {
	q.stopTimersLocked()
	if notify {
		// Before the completions: the host's QP is in ERR by the time software can see the
		// error CQE, as a NIC's is (a query right after the poll found it still in RTS once:
		// provider's TestE2EMRAccessFlags in a make test run after the doorbell wake).
		q.pending = append(q.pending, event{kind: evQPError, st: cause})
	}
	st := first
	for i := q.head; i < len(q.sq); i++ {
		w := &q.sq[i]
		q.pushSend(w, st)
		st = StatusWRFlushErr
	}
	clear(q.sq)
	q.sq = q.sq[:0]
	q.head, q.cur, q.curPkt, q.rdOut = 0, 0, 0, 0
	if q.inSend {
		q.pending = append(q.pending, event{kind: evRecv, rc: RecvCompletion{Index: q.recv.Index, Status: StatusWRFlushErr, SrcQPN: q.cfg.RemoteQPN}})
	}
	q.inSend, q.inWrite = false, false
	q.recv, q.wbuf = Recv{}, nil
	q.setState(StateError)
}

func (q *QP) pushSend(w *sendWR, st Status) {
	n := uint32(w.length)
	if w.wr.Op.isAtomic() {
		n = 8
	}
	if st != StatusSuccess {
		n = 0
	}
	q.pending = append(q.pending, event{kind: evSend, sc: SendCompletion{
		Index: w.wr.Index, Op: w.wr.Op, Status: st, ByteLen: n, Signaled: w.wr.Signaled,
	}})
}

// unlockAndDeliver releases mu and delivers queued completions in order. Only one goroutine
// delivers at a time; events queued meanwhile (also by callbacks re-entering the QP) are
// delivered by it before it returns.
func (q *QP) unlockAndDeliver() {
	if q.delivering || len(q.pending) == 0 {
		q.mu.Unlock()
		return
	}
	q.delivering = true
	for len(q.pending) > 0 {
		batch := q.pending
		q.pending = q.spare[:0]
		q.mu.Unlock()
		for i := range batch {
			e := &batch[i]
			switch e.kind {
			case evSend:
				q.host.SendCompleted(e.sc)
			case evRecv:
				q.host.RecvCompleted(e.rc)
			case evQPError:
				q.host.QPError(e.st)
			}
		}
		clear(batch)
		q.mu.Lock()
		q.spare = batch[:0]
	}
	q.delivering = false
	q.mu.Unlock()
}

// Post implements Transport. It returns an error wrapping ErrConfig for a malformed WR (unknown
// op, atomic result list not 8 bytes); the NIC reports those as local errors.
func (q *QP) Post(wr *WorkRequest) error {
	length := totalLen(wr.Local)
	switch wr.Op {
	case OpSend, OpSendImm, OpWrite, OpWriteImm, OpRead:
	case OpCompareSwap, OpFetchAdd:
		if length != 8 {
			return fmt.Errorf("rc: post %v: result list holds %d bytes, want 8: %w", wr.Op, length, ErrConfig)
		}
	default:
		return fmt.Errorf("rc: post op %v: %w", wr.Op, ErrConfig)
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return fmt.Errorf("rc: post: %w", ErrClosed)
	}
	switch q.State() {
	case StateRTS:
	case StateError:
		w := sendWR{wr: *wr, length: length}
		q.pushSend(&w, StatusWRFlushErr)
		q.unlockAndDeliver()
		return nil
	default:
		s := q.State()
		q.mu.Unlock()
		return fmt.Errorf("rc: post %v in state %v: %w", wr.Op, s, ErrState)
	}
	n := packets(length, q.mtu)
	if wr.Op.isAtomic() {
		n = 1
	}
	if q.head > 0 && q.head == len(q.sq) {
		// Everything completed: reuse the slice from the start.
		clear(q.sq)
		q.sq = q.sq[:0]
		q.cur -= q.head
		q.head = 0
	} else if q.head > 1024 && q.head > len(q.sq)/2 {
		m := copy(q.sq, q.sq[q.head:])
		clear(q.sq[m:])
		q.sq = q.sq[:m]
		q.cur -= q.head
		q.head = 0
	}
	q.sq = append(q.sq, sendWR{wr: *wr, length: length, npkts: n})
	q.pumpLocked()
	q.unlockAndDeliver()
	return nil
}

// FlushRecv implements Transport.
func (q *QP) FlushRecv() {
	q.mu.Lock()
	if q.State() == StateError && !q.closed {
		for {
			r, ok := q.host.PopRecv()
			if !ok {
				break
			}
			q.pending = append(q.pending, event{kind: evRecv, rc: RecvCompletion{Index: r.Index, Status: StatusWRFlushErr, SrcQPN: q.cfg.RemoteQPN}})
		}
	}
	q.unlockAndDeliver()
}

// Close implements Transport.
func (q *QP) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	q.stopTimersLocked()
	return nil
}

// HandlePacket implements Transport.
func (q *QP) HandlePacket(p *roce.Packet) {
	q.mu.Lock()
	st := q.State()
	if q.closed || (st != StateRTR && st != StateRTS) {
		// A QP in RESET, INIT or ERR silently drops what it receives.
		q.mu.Unlock()
		return
	}
	q.stats.PacketsReceived++
	switch p.BTH.Opcode {
	case roce.Acknowledge, roce.AtomicAcknowledge, roce.ReadResponseFirst, roce.ReadResponseMiddle,
		roce.ReadResponseLast, roce.ReadResponseOnly:
		if st == StateRTS {
			q.requesterRecvLocked(p)
		}
	default:
		q.responderRecvLocked(p)
	}
	q.unlockAndDeliver()
}

// newPacket returns a packet of this connection with the BTH filled in.
func (q *QP) newPacket(op roce.Opcode, psn uint32) *roce.Packet {
	return &roce.Packet{
		SrcIP:   q.cfg.Link.Addr(),
		DstIP:   q.cfg.RemoteIP,
		SrcPort: q.srcPort,
		BTH: roce.BTH{
			Opcode: op,
			PKey:   q.cfg.PKey,
			DestQP: q.cfg.RemoteQPN,
			PSN:    psn & psnMask,
		},
		Has: op.Headers(),
	}
}

func (q *QP) transmit(p *roce.Packet) {
	q.stats.PacketsSent++
	q.cfg.Link.Send(p)
}

// Describe reports the requester's and responder's sequence state, for a failing test's
// message.
func (q *QP) Describe() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	next := uint32(0)
	if q.head < len(q.sq) {
		next = q.sq[q.head].firstPSN
	}
	return fmt.Sprintf("state %v sq %d head %d cur %d (first psn %#x) nextPSN %#x una %#x sendHigh %#x rdOut %d retries %d rnrWait %v recovering %v timer %v ePSN %#x nakSent %v",
		q.State(), len(q.sq), q.head, q.cur, next, q.nextPSN, q.una, q.sendHigh, q.rdOut, q.retries, q.rnrWait, q.recovering, q.ackTimer != nil, q.ePSN, q.nakSent)
}

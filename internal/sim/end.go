package sim

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/provider/verbs"
)

// sent is a send WR posted and not yet retired by a completion.
type sent struct {
	wrid     uint64
	op       verbs.WROpcode
	signaled bool
	seq      uint64 // two-sided sequence (SEND, WRITE_WITH_IMM) or the WR's post index
	stage    int    // staging or landing slot
	target   int    // the peer's slot a WRITE lands in
	n        int
	add      uint64
	// before: for an atomic, the adds posted before it, which is what it must find in the
	// peer's counter (and return) if every earlier atomic ran exactly once, in order.
	before uint64
	inelig bool // posted with failover.SendIneligible
	inline bool // posted with SendInline (inline.go)
}

// end is one QP of a pair and what the application knows about it.
type end struct {
	h     *host
	host  int
	pair  int
	qp    verbs.QP
	ep    verbs.Endpoint
	peer  *end
	block int // byte offset of the pair's block in the host buffer

	sq       []sent
	posts    uint64 // send WRs posted, all time (the wr_ids)
	twoSided uint64 // SEND/WRITE_WITH_IMM posted, all time
	failed   bool   // an error completion came back on the send queue

	recvPosted, recvDone uint64
	recvFailed           uint64 // receives completed with an error (flushed)
	expect               uint64 // the peer's next two-sided sequence this end must receive

	addSum, addPosted uint64 // FETCH_AND_ADD: completed, posted

	// Over the failover layer (risky.go): the QP's send state at the last step, and whether
	// the pair was refused a fallback for an unsafe WR (errors allowed).
	lastSend failover.SendState
	refused  bool
	// recvOnly: the QP was left in RTR (recvonly.go): it never posts a send.
	recvOnly bool
	// inline is the QP's MaxInlineData: payloads up to it are posted inline (inline.go).
	inline int
	// gone: the application destroyed the QP (stop.go); nothing is posted or polled on it.
	gone bool
	// rq is the QP's receive depth; its receives land in recvSlots slots from byte recvOff
	// of the host buffer (the block's 32, or deepRQ of their own: deep.go).
	rq, recvOff, recvSlots int
	// sqMax is how many sends the application keeps outstanding: sqDepth, or deepSends in a
	// deep run (deep.go).
	sqMax int
}

func (e *end) slot(i, n int) []byte {
	off := e.block + i*slotSize
	return e.h.buf.Bytes()[off : off+n]
}

// recvAt is the byte offset in the host buffer of receive n's slot.
func (e *end) recvAt(n uint64) int { return e.recvOff + int(n%uint64(e.recvSlots))*slotSize }

func (e *end) slotAddr(i int) uint64 {
	return e.h.mr.Addr() + uint64(e.block+i*slotSize)
}

// counter is the FETCH_AND_ADD word in this end's block (the peer adds to it).
func (e *end) counter() uint64 {
	return binary.LittleEndian.Uint64(e.slot(counterSlot, 8))
}

// fill writes the payload of (a, b, seq) into p: seq first, then bytes from a PCG stream.
func fill(p []byte, a, b, seq uint64) {
	r := rand.New(rand.NewPCG(a<<32|b, seq))
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	if len(p) >= 8 {
		binary.LittleEndian.PutUint64(p, seq)
	}
}

// intact reports whether p holds the payload of (a, b, seq).
func intact(p []byte, a, b, seq uint64) bool {
	r := rand.New(rand.NewPCG(a<<32|b, seq))
	for i := range p {
		want := byte(r.Uint32())
		if i < 8 && len(p) >= 8 {
			want = byte(seq >> (8 * i))
		}
		if p[i] != want {
			return false
		}
	}
	return true
}

// post posts one send WR of kind op on e, with failover.SendIneligible if inelig. It reports
// false when e cannot take it now.
func (e *end) post(r *rand.Rand, op verbs.WROpcode, signal, inelig bool) (sent, error, bool) {
	if e.failed || len(e.sq) >= e.sqMax {
		return sent{}, nil, false
	}
	s := sent{wrid: e.posts, op: op, seq: e.posts, stage: int(e.posts % stageSlots), inelig: inelig}
	// An unsignaled run must end before the queue is full: its completion retires it.
	s.signaled = signal || r.IntN(2) == 0 || len(e.sq) == e.sqMax-1
	wr := verbs.SendWR{WRID: s.wrid, Opcode: op}
	if s.signaled {
		wr.Flags = verbs.SendSignaled
	}
	if inelig {
		wr.Flags |= failover.SendIneligible
	}
	switch op {
	case verbs.WRSend, verbs.WRRDMAWriteWithImm, verbs.WRRDMAWrite:
		s.n = 8 + r.IntN(slotSize-8)
		if op != verbs.WRRDMAWrite {
			s.seq = e.twoSided
		}
		fill(e.slot(s.stage, s.n), uint64(e.host), uint64(e.pair), s.seq)
		wr.SGL = []verbs.SGE{e.h.mr.SGE(e.block+s.stage*slotSize, s.n)}
		if op != verbs.WRSend {
			s.target = writeBase + int(e.posts%32)
			wr.RemoteAddr, wr.RKey = e.peer.slotAddr(s.target), e.peer.h.mr.RKey()
		}
		if op == verbs.WRRDMAWriteWithImm {
			wr.Imm = uint32(s.seq)
		}
		if s.n <= e.inline {
			s.inline = true
			wr.Flags |= verbs.SendInline
		}
	case verbs.WRRDMARead:
		s.stage = readBase + int(e.posts%32)
		s.n = 8 + r.IntN(slotSize-8)
		clear(e.slot(s.stage, s.n))
		wr.SGL = []verbs.SGE{e.h.mr.SGE(e.block+s.stage*slotSize, s.n)}
		wr.RemoteAddr, wr.RKey = e.peer.slotAddr(readSrc), e.peer.h.mr.RKey()
	case verbs.WRAtomicFetchAdd, verbs.WRAtomicCmpAndSwp:
		s.stage = int(e.posts % stageSlots)
		s.n = 8
		s.add = 1 + uint64(r.IntN(1000))
		s.before = e.addPosted
		wr.SGL = []verbs.SGE{e.h.mr.SGE(e.block+s.stage*slotSize, 8)}
		wr.RemoteAddr, wr.RKey = e.peer.slotAddr(counterSlot), e.peer.h.mr.RKey()
		wr.CompareAdd = s.add
		if op == verbs.WRAtomicCmpAndSwp {
			// Swaps the counter from the value it has if every earlier atomic ran once to
			// that plus the add: a duplicate or a reordering makes it fail (and return the
			// value it found), where a FETCH_ADD would add twice.
			wr.CompareAdd, wr.Swap = s.before, s.before+s.add
		}
	}
	if err := e.qp.PostSend([]verbs.SendWR{wr}); err != nil {
		return s, err, true
	}
	if s.inline {
		scribble(e.slot(s.stage, s.n), uint64(e.host), uint64(e.pair), s.seq) // the buffer is ours again
	}
	e.posts++
	if op == verbs.WRSend || op == verbs.WRRDMAWriteWithImm {
		e.twoSided++
	}
	if op.Atomic() {
		e.addPosted += s.add
	}
	e.sq = append(e.sq, s)
	return s, nil, true
}

// recvTag marks a receive's wr_id: an error completion's opcode is undefined (ibv_poll_cq(3):
// only wr_id, status, qp_num and vendor_err are), so on a CQ shared by both queues the
// wr_id alone says which queue a flushed WR came from, as applications encode it.
const recvTag = 1 << 63

// postRecv posts one receive on e if its RQ has room.
func (e *end) postRecv() (bool, error) {
	if e.recvPosted-e.recvDone >= uint64(e.rq) {
		return false, nil
	}
	err := e.qp.PostRecv([]verbs.RecvWR{{WRID: recvTag | e.recvPosted, SGL: []verbs.SGE{e.h.mr.SGE(e.recvAt(e.recvPosted), slotSize)}}})
	if err != nil {
		return true, err
	}
	e.recvPosted++
	return true, nil
}

package failover

import (
	"fmt"
	"sort"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// decodedWQE is a WQE of the default SQ as read back and decoded (decodedLocked), with the
// local keys inject corrupted restored.
type decodedWQE struct {
	wr     verbs.SendWR
	inline []byte
}

// wqeDecodes keeps what was decoded of the default ring, by position. A WQE's bytes do not
// change while it is outstanding, and a position names one WQE until the SQ is reset
// (provider.QP.SendResets). A round lists the ring up to five times: the key check before
// it starts (remote-address segments only, missingDefRKeysLocked), the retransmission check
// (checkSendsLocked, which decodes each WQE into scratch; the initiator's, when every key
// was found good, checks only the opcodes there and the keys on the decode kept after its
// notification, checkOpsLocked), the decode kept here once the notification is posted
// (prepareLocked), and after the reply the key check and the repost, which read what is
// kept. A kept pass over the ring took 2.1–3.6 µs where a decoding one took 10.7–15.1 µs
// (about 16 and 6 WQEs, a WRITE and a SEND stream, means of 100 passes inside a round of
// BenchmarkFallbackLatency, a temporary probe of 2026-11-30).
//
// The decodes are kept in ring order in one slice, and their gather lists in one array,
// both sized for the outstanding WQEs when the first is decoded: a map and a gather list
// allocated per WQE made a decoding pass twice as long (docs/PERFORMANCE.md, tenth stop).
type wqeDecodes struct {
	resets uint32                          // SendResets when ents was filled
	ents   []decodedAt                     // by position, oldest first (serial order)
	sges   []verbs.SGE                     // the gather lists' array (appended to; a full one is replaced)
	buf    [mlx5.MaxDS * mlx5.SegSize]byte // a WQE read back
}

// decodedAt is a kept decode and its ring position.
type decodedAt struct {
	pos uint32
	d   decodedWQE
}

// decodedLocked returns the WQE at pos of the default SQ, decoded, from the cache when it
// holds this incarnation's (q.mu held, the default SQ's gates closed).
func (q *QP) decodedLocked(pos uint32) (decodedWQE, error) {
	i, ok := q.decodeSlotLocked(pos)
	if ok {
		return q.wqeDec.ents[i].d, nil
	}
	c := &q.wqeDec
	d, err := q.readDecodeLocked(pos, q.sgeTailLocked())
	if err != nil {
		return decodedWQE{}, err
	}
	if d.wr.Flags&verbs.SendInline == 0 {
		c.sges = c.sges[:len(c.sges)+len(d.wr.SGL)]
	}
	c.ents = append(c.ents, decodedAt{})
	copy(c.ents[i+1:], c.ents[i:])
	c.ents[i] = decodedAt{pos: pos, d: d}
	return d, nil
}

// sgeTailLocked is the free end of the gather lists' array, with room for any WQE's list:
// decodedLocked keeps what it decodes there, the check (checkSendsLocked) reuses it.
func (q *QP) sgeTailLocked() []verbs.SGE {
	c := &q.wqeDec
	if cap(c.sges)-len(c.sges) < mlx5.MaxDS {
		// The lists handed out keep the old array.
		c.sges = make([]verbs.SGE, 0, max(2*cap(c.sges), (len(q.outSends)+1)*q.maxSGE, mlx5.MaxDS))
	}
	return c.sges[len(c.sges):]
}

// readDecodeLocked reads the WQE at pos of the default SQ back and decodes it, its gather
// list into sgl's array (sgeTailLocked), the local keys inject corrupted
// restored; nothing is kept.
func (q *QP) readDecodeLocked(pos uint32, sgl []verbs.SGE) (decodedWQE, error) {
	c := &q.wqeDec
	n, err := q.def.ReadSendWQE(pos, c.buf[:])
	if err != nil {
		return decodedWQE{}, fmt.Errorf("failover: QP %#x: read back WQE at %d: %w", q.qpn, pos, err)
	}
	dw, err := provider.DecodeSendWQEInto(c.buf[:n], sgl)
	if err != nil {
		return decodedWQE{}, fmt.Errorf("failover: QP %#x: WQE at %d: %w", q.qpn, pos, err)
	}
	d := decodedWQE{wr: dw.WR, inline: dw.Inline}
	if d.wr.Flags&verbs.SendInline == 0 {
		k := len(d.wr.SGL)
		d.wr.SGL = d.wr.SGL[:k:k] // a caller's append must not write the next WQE's list
		for i := range d.wr.SGL {
			if k, ok := q.injKeys[d.wr.SGL[i].LKey]; ok {
				d.wr.SGL[i].LKey = k
			}
		}
	}
	return d, nil
}

// cachedDecodeLocked returns the WQE at pos as decoded before in this incarnation of the
// default SQ, if it was. It allocates nothing: the passes before the notification ask it
// first (the key look-up, the retransmission check), and sizing the kept decodes there, for
// nothing kept yet, took 2–3 µs p50 of the round's share with 64 WQEs outstanding (a
// temporary trace of 2026-11-30); the decode kept after the notification sizes them.
func (q *QP) cachedDecodeLocked(pos uint32) (decodedWQE, bool) {
	if c := &q.wqeDec; len(c.ents) == 0 || c.resets != q.def.SendResets() {
		return decodedWQE{}, false
	}
	if i, ok := q.decodeSlotLocked(pos); ok {
		return q.wqeDec.ents[i].d, true
	}
	return decodedWQE{}, false
}

// decodeSlotLocked finds pos among the kept decodes: its index and true, or where it goes
// and false. A reset of the SQ since they were kept empties them first; the first decode of
// an incarnation sizes the slice for the outstanding WQEs.
func (q *QP) decodeSlotLocked(pos uint32) (int, bool) {
	c := &q.wqeDec
	if r := q.def.SendResets(); c.resets != r || c.ents == nil {
		if c.ents == nil || cap(c.ents) < len(q.outSends) {
			c.ents = make([]decodedAt, 0, max(len(q.outSends), 8))
		}
		c.ents = c.ents[:0]
		c.sges = c.sges[:0:0] // the lists handed out keep their array
		c.resets = r
	}
	ents := c.ents
	// Positions kept are oldest first; most look-ups are in that order, the next one after
	// the last, which the search finds as quickly as any.
	i := sort.Search(len(ents), func(i int) bool { return int32(ents[i].pos-pos) >= 0 })
	return i, i < len(ents) && ents[i].pos == pos
}

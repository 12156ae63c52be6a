package nic

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
)

// CQConfig describes a completion queue as the mlx5 create_cq driver data gives it: a
// software-allocated CQE buffer and doorbell record, and the UAR page whose CQ doorbell arms it.
type CQConfig struct {
	// Buf is the address of the CQE buffer: CQEs × CQESize bytes, 64-byte aligned.
	Buf uint64
	// CQEs is the number of entries, a power of two (1..1<<22).
	CQEs int
	// CQESize is the entry size in bytes: 64, or 128 (the CQE in the second half).
	CQESize int
	// DBRec is the address of the 8-byte doorbell record: set_ci word then arm word.
	DBRec uint64
	// UAR is the page whose CQ doorbell arms this CQ (mlx5_ib_create_cq.uar_page_index); nil
	// accepts arm doorbells from any page of the device.
	UAR *UAR
	// OnComp is the completion event: called once when an armed CQ receives a CQE that
	// satisfies the arm. It must not block.
	OnComp func()
	// OnError is called once when the CQ overruns (IBV_EVENT_CQ_ERR). It must not block.
	OnError func()
}

// CQ is a completion queue the device writes CQE64s into.
type CQ struct {
	cqn   uint32
	dev   *Device
	uar   *UAR
	ring  *cqRing
	dbrec dbRecord
	n     uint32
	users atomic.Int32

	onComp, onError func()

	mu      sync.Mutex // guards the fields below and every access to the ring and record
	pi      uint32     // CQEs written so far (producer counter)
	dead    bool       // destroyed: the ring and record may be unmapped
	errored bool
	armed   bool
	armSol  bool
	hasSol  bool   // a solicited or error CQE has been written
	solIdx  uint32 // producer index of the last such CQE
	lastArm uint32 // last arm word acted upon (or the record's initial word)
	armSeen bool   // lastArm came from an arm request
}

// CreateCQ creates a completion queue over software memory.
func (d *Device) CreateCQ(cfg CQConfig) (*CQ, error) {
	const op = "create cq"
	if d.closed.Load() {
		return nil, newErr(op, ErrClosed, unix.ENODEV, "device %s", d.name)
	}
	if cfg.CQESize != cqeSize && cfg.CQESize != 2*cqeSize {
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "cqe size %d", cfg.CQESize)
	}
	if cfg.CQEs <= 0 || cfg.CQEs > 1<<22 || cfg.CQEs&(cfg.CQEs-1) != 0 {
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "%d cqes", cfg.CQEs)
	}
	if cfg.Buf == 0 || cfg.Buf%64 != 0 || cfg.DBRec == 0 || cfg.DBRec%8 != 0 {
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "buffer %#x dbrec %#x", cfg.Buf, cfg.DBRec)
	}
	if !checkMapped(cfg.Buf, uint64(cfg.CQEs*cfg.CQESize)) || !checkMapped(cfg.DBRec, 8) {
		return nil, newErr(op, ErrInvalid, unix.EFAULT, "buffer %#x or dbrec %#x not mapped", cfg.Buf, cfg.DBRec)
	}
	ring, err := newCQRing(hostBytes(cfg.Buf, cfg.CQEs*cfg.CQESize), cfg.CQEs, cfg.CQESize)
	if err != nil {
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "%v", err)
	}
	dbrec, err := newDBRecord(hostBytes(cfg.DBRec, 8))
	if err != nil {
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "%v", err)
	}
	c := &CQ{
		dev:     d,
		uar:     cfg.UAR,
		ring:    ring,
		dbrec:   dbrec,
		n:       uint32(cfg.CQEs),
		onComp:  cfg.OnComp,
		onError: cfg.OnError,
	}
	// Mark the arm word "never armed" (see armFromDoorbell). Software only ever writes
	// this word and zeroes it before creating the CQ, so the mark is invisible to it.
	dbrec.store(dbCQArm, armUnset)
	c.lastArm = armUnset
	d.mu.Lock()
	d.nextCQN = (d.nextCQN + 1) & 0xffffff
	if d.nextCQN == 0 {
		d.nextCQN = 1
	}
	c.cqn = d.nextCQN
	d.mu.Unlock()
	d.objMu.Lock()
	d.cqs[c.cqn] = c
	d.cqsByUAR[c.uar] = append(d.cqsByUAR[c.uar], c)
	d.objMu.Unlock()
	return c, nil
}

// CQN is the CQ number.
func (c *CQ) CQN() uint32 { return c.cqn }

// Errored reports whether the CQ overran and is in error.
func (c *CQ) Errored() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errored
}

// Destroy removes the CQ. It fails with ErrBusy (EBUSY) while a QP still completes into it.
// When it returns the device no longer touches the CQE buffer or the doorbell record (a
// doorbell scan in progress has finished with them), so software may unmap them at once.
func (c *CQ) Destroy() error {
	if n := c.users.Load(); n > 0 {
		return newErr("destroy cq", ErrBusy, unix.EBUSY, "cq %#x used by %d qps", c.cqn, n)
	}
	d := c.dev
	d.objMu.Lock()
	defer d.objMu.Unlock()
	if d.cqs[c.cqn] != c {
		return newErr("destroy cq", ErrNotFound, unix.EINVAL, "cq %#x", c.cqn)
	}
	delete(d.cqs, c.cqn)
	list := d.cqsByUAR[c.uar]
	for i, x := range list {
		if x == c {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(d.cqsByUAR, c.uar)
	} else {
		d.cqsByUAR[c.uar] = list
	}
	// The watcher may hold the CQ from a snapshot taken before it left the lists; it reads
	// the record only under c.mu after checking dead.
	c.mu.Lock()
	c.dead = true
	c.armed = false
	c.mu.Unlock()
	return nil
}

// push writes one CQE. solicited marks a completion that satisfies a solicited-only arm
// (a receive of a message with the SE bit); error CQEs always do. It returns false when the
// CQ had no free entry (overrun) or is in error.
func (c *CQ) push(e *cqe, solicited bool) bool {
	if !c.dev.alive() {
		return false // a hung or dead device writes no CQE
	}
	isErr := e.isError()
	c.mu.Lock()
	if c.errored || c.dead {
		c.mu.Unlock()
		return false
	}
	if !c.ring.hasRoom(c.pi, c.dbrec.consumerIndex()) {
		// No free entry: the hardware reports a CQ overrun (IBV_EVENT_CQ_ERR) and stops
		// writing to the CQ.
		c.errored = true
		c.armed = false
		c.mu.Unlock()
		if c.onError != nil {
			c.onError()
		}
		return false
	}
	// The body first, then the word holding op_own with the owner bit of this pass in one
	// atomic store: software that sees the new owner bit sees the whole entry.
	e.solicited = solicited && !isErr
	c.ring.publish(c.pi, e)
	if solicited || isErr {
		c.hasSol, c.solIdx = true, c.pi
	}
	c.pi++
	fire := c.armed && (!c.armSol || solicited || isErr)
	if fire {
		c.armed = false
	}
	c.mu.Unlock()
	c.dev.stats.cqesWritten.Add(1)
	if fire || isErr {
		idle.hot()
	}
	if fire && c.onComp != nil {
		c.onComp()
	}
	return true
}

// arm applies an arm command word (sn<<28 | cmd | ci, rdma-core mlx5_arm_cq). Like the
// hardware, it raises the event at once when entries past the given consumer index already
// exist, so a completion that raced with the arm is never left without an event.
func (c *CQ) arm(word uint32) {
	ci := word & mlx5.CQDBCIMask
	c.mu.Lock()
	if c.armSeen && word == c.lastArm {
		// The same request again (its record was already seen while scanning for a hidden
		// arm, or software rang twice): the arm sequence number did not move, so it is not
		// a new arm.
		c.mu.Unlock()
		return
	}
	c.lastArm, c.armSeen = word, true
	if c.errored || c.dead {
		c.mu.Unlock()
		return
	}
	c.armed = true
	c.armSol = word&mlx5.CQDBCmdMask == mlx5.CQDBReqNotSol
	// pending counts the CQEs written past the arm's consumer index. It may exceed the ring
	// size. The race: software writes the arm word with its consumer index of the time and
	// then polls (ibv_req_notify_cq before ibv_poll_cq, as failover's event handlers do); a
	// device that acts on the doorbell late (the watcher delayed under CPU load) may find
	// that software has polled past that index since and that up to a ring's worth of CQEs
	// more have been written. Those are past the arm's index all the same, so the event is
	// due now. The former bound pending <= c.n left such an arm set with nothing more to
	// come (every WQE completed, the CQ full as far as the device knows) and the completions
	// unpolled for good (TestLateArmBehindFullRing; failover's TestSharedControlStorm hung so
	// under CPU load). Only a consumer index ahead of the producer, a difference in the upper
	// half of the 24-bit space, has no entry past it.
	pending := (c.pi - ci) & mlx5.CQDBCIMask
	fire := false
	if pending > 0 && pending <= mlx5.CQDBCIMask>>1 {
		if !c.armSol {
			fire = true
		} else if c.hasSol && (c.solIdx-ci)&mlx5.CQDBCIMask < pending {
			fire = true
		}
	}
	if fire {
		c.armed = false
	}
	c.mu.Unlock()
	if fire && c.onComp != nil {
		c.onComp()
	}
}

// armUnset is the value the device leaves in a new CQ's arm doorbell record word. Arm words
// software writes (sn<<28 | cmd | ci) never have bits 31:30 set.
const armUnset = 0xc0000000

// armFromDoorbell handles a CQ doorbell written to page u. The CQ named in the doorbell is
// armed with the doorbell's word. Every CQ of the device shares the register at
// MLX5_CQ_DOORBELL of its page, so a second arm written before the watcher consumed the first
// would hide it; the other CQs armed through this page are therefore checked against their
// arm doorbell record, which software writes before the register (mlx5_arm_cq), and armed
// when it changed since the last arm the device acted on. A CQ's very first arm is often the
// word 0 (sequence 0, consumer index 0), which is what software zeroed the record to; so that
// this first arm is not mistaken for "no change", the device marks the word with armUnset when
// the CQ is created. This is the emulator's one write to a doorbell record: real hardware sees
// every MMIO write and needs no such mark.
func (d *Device) armFromDoorbell(u *UAR, cqn, word uint32) {
	d.objMu.RLock()
	named := d.cqs[cqn]
	others := append(append(d.armScratch[:0], d.cqsByUAR[u]...), d.cqsByUAR[nil]...)
	d.objMu.RUnlock()
	if named != nil && (named.uar == nil || named.uar == u) {
		named.arm(word)
	}
	for i, c := range others {
		others[i] = nil
		if c == named {
			continue
		}
		c.mu.Lock()
		if c.dead {
			// Destroyed since the snapshot: its record may be unmapped already.
			c.mu.Unlock()
			continue
		}
		w := c.dbrec.load(dbCQArm)
		changed := w != c.lastArm
		c.mu.Unlock()
		if changed {
			c.arm(w)
		}
	}
	d.armScratch = others[:0]
}

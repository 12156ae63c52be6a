package nic

import (
	"runtime"
	"time"

	"github.com/shift-rdma/shift/mlx5"
)

// Adaptive polling of the doorbell registers. A real NIC learns of a doorbell from the MMIO
// write itself; the emulated one must look at memory. Once idle, each device's watcher parks
// and the process's one idle scanner (scanner.go) watches its registers, with those of every
// other idle device, and wakes it when one is written. A doorbell written through package
// mlx5 (the Go provider, SHIFT) wakes the parked watcher itself (mlx5.UARWaker: the model's
// stand-in for the MMIO write reaching the NIC); one written by other code (the plugin's C
// fast path, Debian's libmlx5) or with the wake off (provider.Options.NoDeviceWake: the
// plugin) waits for the scanner. Anything else that needs the watcher sooner (a QP moved to
// RTS with rung doorbells pending, a stalled send queue whose earlier WRs completed, a QP
// moved to ERR) wakes it through kick.
//
// For the writers the scanner serves, the watcher spins (yielding the processor between
// passes) for spinWindow after the last doorbell before it parks, so back-to-back posts see
// microsecond latency instead of the scanner's period. For writers that wake it themselves
// the spin buys nothing and costs a processor: on the 2-core VM two default NICs kicked by
// their QPs' moves to ERR in a fallback spun at once, and every goroutine waiting in the
// runtime's network poller (the fabric's UDP readers, SHIFT's event loops) waited until a
// spin ended, as a processor running a yielding goroutine never looks at the poller. So the
// watcher spins only while the latest wake that brought it doorbells came from the scanner
// (spinAfterWake).
const (
	spinWindow = 50 * time.Microsecond
	// deadSleep is how often the watcher of a hung or dead device looks whether it closes.
	deadSleep = time.Millisecond
)

// doorbell is one consumed register write.
type doorbell struct {
	uar   *UAR
	bfreg int // -1 for the CQ arm doorbell
	val   [8]byte
}

// watch is the device's doorbell watcher goroutine.
func (d *Device) watch() {
	defer close(d.watchDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var (
		dbs        = make([]doorbell, 0, 64)
		lastActive = time.Now()
		spin       = spinWindow // until a poke shows that the writers wake the device
	)
	for {
		select {
		case <-d.stop:
			return
		default:
		}
		if !d.alive() {
			// A hung or dead device executes nothing: doorbells stay where software wrote
			// them, deferred work stays queued. The watcher only waits to be closed.
			timer.Reset(deadSleep)
			select {
			case <-d.stop:
				return
			case <-timer.C:
			case <-d.wake:
				timer.Stop()
			}
			continue
		}
		var active bool
		dbs, active = d.pass(dbs[:0])
		if active {
			lastActive = time.Now()
			runtime.Gosched()
			continue
		}
		if time.Since(lastActive) < spin {
			runtime.Gosched()
			continue
		}
		// Idle: the scanner watches the registers from now on (the recheck list is empty
		// here, runRechecks keeps the watcher spinning while it is not). A doorbell written
		// between the last pass and the park was not poked; it is still in its register.
		// The look after the park finds it at once rather than at the scanner's next tick
		// (up to its shortest period): without a spin, parks follow every burst of work.
		d.waker.Park()
		if d.peekRegisters() {
			_, _ = d.waker.Unpark()
			continue
		}
		d.stats.sleeps.Add(1)
		idle.park(d)
		select {
		case <-d.stop:
			_, _ = d.waker.Unpark()
			idle.unpark(d)
			return
		case <-d.wake:
		}
		poked, scanned := d.waker.Unpark() // the scanner Claims the parks it ends
		if poked {
			d.stats.pokeWakes.Add(1)
		}
		spin = spinAfterWake(spin, scanned, poked)
		idle.unpark(d) // woken by a kick or a poke: leave the scanner's list (no-op when it woke us)
		lastActive = time.Now()
	}
}

// spinAfterWake is how long the watcher spins once idle after a wake, given the spin before
// it: a wake by the scanner (a doorbell nobody announced) calls for the spin, a poke (the
// writer wakes the device) for none, and a kick (work of the device's own) keeps what the
// doorbells' latest wake chose. One park ends by one of the scanner and a poke at most
// (mlx5.UARWaker.Claim).
func spinAfterWake(prev time.Duration, scanned, poked bool) time.Duration {
	switch {
	case scanned:
		return spinWindow
	case poked:
		return 0
	}
	return prev
}

// pass is one look at everything the device owes work for: the doorbell registers, the
// kicked QPs, the shared registers' rechecks, receives posted to QPs in ERR. It reports
// whether it found any.
func (d *Device) pass(dbs []doorbell) ([]doorbell, bool) {
	dbs = d.pollRegisters(dbs)
	active := len(dbs) > 0
	for i := range dbs {
		d.dispatch(&dbs[i])
	}
	if d.runKicks() {
		active = true
	}
	if len(d.rechecks) > 0 && d.runRechecks() {
		active = true
	}
	if d.flushErrRecvs() {
		active = true
	}
	d.stats.passes.Add(1)
	return dbs, active
}

// Step runs one pass of a stepped device (Config.Stepped) on the caller's goroutine and
// reports whether it found work; a closed, hung or dead device, or one that is not stepped,
// does nothing.
func (d *Device) Step() bool {
	if !d.stepped || d.closed.Load() || !d.alive() {
		return false
	}
	var dbs [8]doorbell
	_, active := d.pass(dbs[:0])
	return active
}

// pending reports whether a parked device has work for its watcher: a written doorbell
// register, a receive posted to a QP in ERR (flushErrRecvs), or a failure (the watcher
// then waits for its close). The idle scanner calls it, from its own goroutine.
func (d *Device) pending(scratch []*QP) (bool, []*QP) {
	if !d.alive() {
		return true, scratch
	}
	if d.peekRegisters() {
		return true, scratch
	}
	if d.errCount.Load() == 0 {
		return false, scratch
	}
	d.errMu.Lock()
	scratch = append(scratch[:0], d.errQPs...)
	d.errMu.Unlock()
	found := false
	for i, q := range scratch {
		if !found && q.gate.enter() {
			found = q.State() == QPSErr && q.pendingRecv()
			q.gate.exit()
		}
		scratch[i] = nil
	}
	return found, scratch[:0]
}

// peekRegisters reports whether any doorbell register of the device holds a write, without
// consuming it.
func (d *Device) peekRegisters() bool {
	d.pollMu.Lock()
	defer d.pollMu.Unlock()
	list := d.uarList.Load()
	if list == nil {
		return false
	}
	for _, u := range *list {
		if u.closed.Load() {
			continue
		}
		if peekReg(u.mem, mlx5.CQDoorbell) {
			return true
		}
		for bf := 0; bf < BfregsPerUAR; bf++ {
			a, b := SQDoorbellOffsets(bf)
			if peekReg(u.mem, a) || peekReg(u.mem, b) {
				return true
			}
		}
	}
	return false
}

// pollRegisters consumes every written doorbell register of every watched UAR page.
func (d *Device) pollRegisters(dbs []doorbell) []doorbell {
	d.pollMu.Lock()
	defer d.pollMu.Unlock()
	list := d.uarList.Load()
	if list == nil {
		return dbs
	}
	for _, u := range *list {
		if u.closed.Load() {
			continue
		}
		if peekReg(u.mem, mlx5.CQDoorbell) {
			if v, ok := swapReg(u.mem, mlx5.CQDoorbell); ok {
				dbs = append(dbs, doorbell{uar: u, bfreg: -1, val: v})
			}
		}
		for bf := 0; bf < BfregsPerUAR; bf++ {
			a, b := SQDoorbellOffsets(bf)
			for _, off := range [2]int{a, b} {
				if !peekReg(u.mem, off) {
					continue
				}
				if v, ok := swapReg(u.mem, off); ok {
					dbs = append(dbs, doorbell{uar: u, bfreg: bf, val: v})
				}
			}
		}
	}
	return dbs
}

// dispatch acts on one doorbell write.
func (d *Device) dispatch(db *doorbell) {
	if db.bfreg < 0 {
		// CQ arm doorbell: bytes 0..3 are sn<<28 | cmd | ci, bytes 4..7 the CQN, both
		// big-endian (rdma-core mlx5_arm_cq).
		d.stats.cqDoorbells.Add(1)
		cqn, word := parseCQDoorbell(db.val)
		d.armFromDoorbell(db.uar, cqn, word)
		return
	}
	// Send doorbell: the first 8 bytes of the last posted WQE's control segment
	// (opmod_idx_opcode, qpn_ds), written by post_send_db either as an 8-byte doorbell or as
	// the head of a blue-flame copy.
	d.stats.sqDoorbells.Add(1)
	qpn := parseSQDoorbellQPN(db.val)
	r := db.uar.bf[db.bfreg].Load()
	if r == nil {
		d.stats.strayDoorbells.Add(1)
		return
	}
	if q := r.find(qpn); q != nil {
		q.rung()
	} else {
		// A doorbell for a QP that is not bound to this register: the hardware drops it (a
		// process cannot ring another QP's queue through its own page).
		d.stats.strayDoorbells.Add(1)
	}
	if len(r.qps) > 1 {
		// Shared register: this write may have overwritten another QP's doorbell before
		// the watcher looked. Re-check every QP on it now and keep re-checking while any
		// of them has rung-able work (doc.go: shared registers).
		d.recheckRegister(r)
		if !db.uar.recheck[db.bfreg] {
			db.uar.recheck[db.bfreg] = true
			d.rechecks = append(d.rechecks, regRef{db.uar, db.bfreg})
		}
	}
}

// regRef names one blue-flame register.
type regRef struct {
	uar *UAR
	reg int
}

// recheckRegister runs every QP bound to a shared register up to its doorbell record, the
// producer counter the hardware reads after a doorbell; it reports whether any of them still
// has work it could run (new WQEs advertised since).
func (d *Device) recheckRegister(r *regQPs) bool {
	d.stats.sharedRechecks.Add(1)
	more := false
	for _, q := range r.qps {
		if q.process() {
			more = true
		}
	}
	return more
}

// runRechecks re-checks the shared registers on the recheck list and drops those whose QPs
// have caught up with their doorbell records; it reports whether any register stays listed.
// Only the watcher goroutine touches the list.
func (d *Device) runRechecks() bool {
	keep := d.rechecks[:0]
	for _, ref := range d.rechecks {
		r := ref.uar.bf[ref.reg].Load()
		if r != nil && len(r.qps) > 1 && !ref.uar.closed.Load() && d.recheckRegister(r) {
			keep = append(keep, ref)
			continue
		}
		ref.uar.recheck[ref.reg] = false
	}
	clear(d.rechecks[len(keep):])
	d.rechecks = keep
	return len(keep) > 0
}

// kick asks the watcher to run q's deferred work soon.
func (d *Device) kick(q *QP) {
	if q.kicked.Swap(true) {
		return
	}
	d.kickMu.Lock()
	d.kicks = append(d.kicks, q)
	d.kickMu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// runKicks runs the deferred work of every kicked QP; it reports whether there was any.
func (d *Device) runKicks() bool {
	d.kickMu.Lock()
	if len(d.kicks) == 0 {
		d.kickMu.Unlock()
		return false
	}
	d.kickRun, d.kicks = d.kicks, d.kickRun[:0]
	d.kickMu.Unlock()
	for i, q := range d.kickRun {
		q.kicked.Store(false)
		q.process()
		d.kickRun[i] = nil
	}
	return true
}

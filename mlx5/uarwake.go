package mlx5

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A real NIC learns of a doorbell from the MMIO write itself. A device model that shares the
// process's address space (the emulated ConnectX, mlx5/emu/nic) can only look at the page:
// it polls while busy and, once idle, leaves its pages to a periodic scanner, so a doorbell
// rung on an idle device waited for the scanner's next look (100 µs–1 ms), three times on a
// fallback's critical path (the notification, the reply, the reposted WRs). A UARWaker lets
// the writer of a register wake such a device at once, the way the PCIe write wakes a NIC:
// the model registers one per page when it creates the page, NewUARPage finds it by the
// page's address, and the doorbell functions (RingAt, RingFast, ArmCQ) poke it after the
// register write. The device still learns what was rung from the page alone; a poke only
// ends its idle wait, and a poke that is missed (see Poke) leaves the scanner to find the
// write as before. A page nobody registered (a real UAR mapping) costs the doorbell one
// nil test.

// UARWaker is the wake-up of a device model that watches UAR memory in this process.
type UARWaker struct {
	park    atomic.Int32 // parkBusy, parkIdle, or who ended the park: parkPoked, parkClaimed
	wake    chan<- struct{}
	yielded atomic.Int64 // ns the pokers spent yielding (Yielded)
}

// The states of a park: one of Poke and Claim ends it (a compare-and-swap from parkIdle), so
// Unpark can tell the device which.
const (
	parkBusy int32 = iota
	parkIdle
	parkPoked
	parkClaimed
)

// NewUARWaker returns a waker that sends on wake (which should be buffered) when poked while
// parked.
func NewUARWaker(wake chan<- struct{}) *UARWaker { return &UARWaker{wake: wake} }

// Park marks the device idle: the next poke wakes it. The device must look at its registers
// after Park (or leave that to a scanner) before it waits: a doorbell written before Park
// was not poked.
func (w *UARWaker) Park() { w.park.Store(parkIdle) }

// Unpark marks the device busy again (it looks at its registers itself) and reports what
// ended the park: a poke, Claim, or neither (the device woke for work of its own).
func (w *UARWaker) Unpark() (poked, claimed bool) {
	s := w.park.Swap(parkBusy)
	return s == parkPoked, s == parkClaimed
}

// Claim ends the park for a waker of the device's own, such as a scanner that found a
// doorbell nobody poked, and reports whether the park was still on: at most one of Claim and
// Poke ends each park. The caller wakes the device itself.
func (w *UARWaker) Claim() bool { return w.park.CompareAndSwap(parkIdle, parkClaimed) }

// Poke wakes the device if it is parked; one poke per park sends. The caller's register
// store and the load of the park's state are not ordered by a fence (a locked instruction on
// every doorbell is what this path avoids), so a device that parks at that very moment may
// be missed: it then finds the write at its next look.
func (w *UARWaker) Poke() {
	if w.park.Load() == parkIdle && w.park.CompareAndSwap(parkIdle, parkPoked) {
		select {
		case w.wake <- struct{}{}:
		default:
		}
		// The woken goroutine is queued on this processor; without a yield it waits for
		// another thread to be woken and steal it (about 300 µs on the 2-core VM,
		// BenchmarkDoorbellAfterIdle in mlx5/emu/nic) or for this goroutine to block.
		t0 := time.Now()
		runtime.Gosched()
		w.yielded.Add(int64(time.Since(t0)))
	}
}

// Yielded is the time the writers of doorbells spent in their pokes' yields so far: the time
// the device model (and whatever else was runnable) ran on their processors. A real NIC
// costs the writer of a doorbell none of it; measurements of the software that rings the
// doorbells subtract it (failover's BenchmarkNetnsLinkDown).
func (w *UARWaker) Yielded() time.Duration { return time.Duration(w.yielded.Load()) }

// uarWakers maps the first byte of a registered UAR page to its waker.
var uarWakers sync.Map // *byte → *UARWaker

// RegisterUARWaker makes the doorbells written into page poke w (for the pages wrapped by
// NewUARPage from now on). The returned function removes the registration; call it before
// the page is unmapped, as its address may be reused.
func RegisterUARWaker(page []byte, w *UARWaker) (unregister func()) {
	if len(page) == 0 {
		return func() {}
	}
	key := &page[0]
	uarWakers.Store(key, w)
	return func() { uarWakers.CompareAndDelete(key, w) }
}

// lookupUARWaker is the waker registered for the page starting at mem, if any.
func lookupUARWaker(mem []byte) *UARWaker {
	if len(mem) == 0 {
		return nil
	}
	if v, ok := uarWakers.Load(&mem[0]); ok {
		return v.(*UARWaker)
	}
	return nil
}

// WithoutWake is u with its doorbells waking no device model (the model still finds them at
// its next look).
func (u UARPage) WithoutWake() UARPage {
	u.wake = nil
	return u
}

// poke wakes the page's device model, if it has one (after a doorbell write).
func (u UARPage) poke() {
	if u.wake != nil {
		u.wake.Poke()
	}
}

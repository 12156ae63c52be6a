package nic

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/mlx5"

	"golang.org/x/sys/unix"
)

// UAR page geometry: a 4 KiB page with the CQ arm doorbell at MLX5_CQ_DOORBELL and four
// blue-flame registers of bf_reg_size bytes from MLX5_BF_OFFSET, each made of two halves that
// post_send_db alternates between (bf->offset ^= bf->buf_size). The numbers come from package
// mlx5, which takes them from mlx5dv.h and the kernel's mlx5_ib.
const (
	// UARPageSize is the size of one UAR page (MLX5_ADAPTER_PAGE_SIZE).
	UARPageSize = mlx5.AdapterPageSize
	// BfregsPerUAR is how many blue-flame registers a UAR page holds.
	BfregsPerUAR = mlx5.BfregsPerUAR
	bfregSize    = mlx5.DefaultBfRegSize
)

// UAR is one User Access Region page of the device: memory the emulated kernel maps into the
// process for its doorbells (mmap of the UAR page). The device watches the page's CQ arm
// doorbell and its blue-flame registers; writing there is the only thing that starts send
// queue execution or arms a CQ.
type UAR struct {
	// Index is the device's number for this page (what the kernel reports as uar index).
	Index uint32

	mem []byte
	dev *Device
	// bf holds, for each blue-flame register, the QPs whose doorbells it carries: an
	// immutable snapshot replaced under bfMu, read by the watcher without locks.
	bf     [BfregsPerUAR]atomic.Pointer[regQPs]
	bfMu   sync.Mutex
	closed atomic.Bool
	// recheck marks, for the watcher alone, the shared registers on its recheck list.
	recheck [BfregsPerUAR]bool
	// unregister removes the page's waker registration (mlx5.RegisterUARWaker).
	unregister func()
}

// regQPs is the set of QPs bound to one blue-flame register. A dedicated register carries
// one QP; a shared one (mlx5_ib's medium-latency class, or bfreg 0) carries any number.
type regQPs struct {
	qps    []*QP
	shared bool
}

// find returns the QP numbered qpn among those bound to the register.
func (r *regQPs) find(qpn uint32) *QP {
	for _, q := range r.qps {
		if q.qpn == qpn {
			return q
		}
	}
	return nil
}

// bind adds q to register reg. A dedicated binding needs a free register; a shared one
// needs a free register or one whose QPs are all shared.
func (u *UAR) bind(reg int, q *QP, shared bool) error {
	u.bfMu.Lock()
	defer u.bfMu.Unlock()
	cur := u.bf[reg].Load()
	if cur != nil && len(cur.qps) > 0 && (!shared || !cur.shared) {
		return newErr("create qp", ErrBusy, unix.EBUSY, "uar %d bfreg %d already serves qp %#x", u.Index, reg, cur.qps[0].qpn)
	}
	next := &regQPs{shared: shared}
	if cur != nil {
		next.qps = append(make([]*QP, 0, len(cur.qps)+1), cur.qps...)
	}
	next.qps = append(next.qps, q)
	u.bf[reg].Store(next)
	return nil
}

// unbind removes q from register reg.
func (u *UAR) unbind(reg int, q *QP) {
	u.bfMu.Lock()
	defer u.bfMu.Unlock()
	cur := u.bf[reg].Load()
	if cur == nil {
		return
	}
	next := &regQPs{shared: cur.shared, qps: make([]*QP, 0, len(cur.qps))}
	for _, o := range cur.qps {
		if o != q {
			next.qps = append(next.qps, o)
		}
	}
	if len(next.qps) == 0 {
		u.bf[reg].Store(nil)
		return
	}
	u.bf[reg].Store(next)
}

// PageID is the device's index of the page.
func (u *UAR) PageID() uint32 { return u.Index }

// Mem is the page itself (UARPageSize bytes, page-aligned, shared read-write). The emulated
// kernel hands it out from mmap; software writes doorbells into it.
func (u *UAR) Mem() []byte { return u.mem }

// Addr is the address of the page.
func (u *UAR) Addr() uint64 { return addrOf(u.mem) }

// SQDoorbellOffsets returns the two offsets (the halves of blue-flame register bfreg) that
// software alternates between when it rings a send doorbell through that register.
func SQDoorbellOffsets(bfreg int) (first, second int) {
	base := mlx5.BFOffset + bfreg*bfregSize
	return base, base + bfregSize/2
}

// AllocUAR allocates a fresh UAR page and starts watching it.
func (d *Device) AllocUAR() (*UAR, error) {
	const op = "alloc uar"
	if d.closed.Load() {
		return nil, newErr(op, ErrClosed, unix.ENODEV, "device %s", d.name)
	}
	mem, err := unix.Mmap(-1, 0, UARPageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, newErr(op, ErrNoSpace, errnoOf(err, unix.ENOMEM), "mmap: %v", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		_ = unix.Munmap(mem)
		return nil, newErr(op, ErrClosed, unix.ENODEV, "device %s", d.name)
	}
	d.nextUAR++
	u := &UAR{Index: d.nextUAR, mem: mem, dev: d}
	// Doorbells written through package mlx5 wake the parked watcher at once (watcher.go).
	u.unregister = mlx5.RegisterUARWaker(mem, d.waker)
	d.uars[u.Index] = u
	d.publishUARs()
	return u, nil
}

// FreeUAR stops watching the page and unmaps it. Software must not touch the page
// afterwards (the kernel unmaps it from the process on the last close). It fails with
// ErrBusy while a QP still rings through it.
func (d *Device) FreeUAR(u *UAR) error {
	const op = "free uar"
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.uars[u.Index] != u {
		return newErr(op, ErrNotFound, unix.EINVAL, "uar %d", u.Index)
	}
	for i := range u.bf {
		if r := u.bf[i].Load(); r != nil && len(r.qps) > 0 {
			return newErr(op, ErrBusy, unix.EBUSY, "uar %d bfreg %d drives qp %#x", u.Index, i, r.qps[0].qpn)
		}
	}
	delete(d.uars, u.Index)
	d.publishUARs()
	return u.release()
}

// release unmaps the page once; the watcher no longer sees it (publishUARs ran under d.mu,
// and the watcher holds d.pollMu while it reads pages).
func (u *UAR) release() error {
	if u.closed.Swap(true) {
		return nil
	}
	u.unregister() // before the address can be reused
	u.dev.pollMu.Lock()
	defer u.dev.pollMu.Unlock()
	if err := unix.Munmap(u.mem); err != nil {
		return newErr("free uar", ErrInvalid, errnoOf(err, unix.EINVAL), "munmap: %v", err)
	}
	return nil
}

// publishUARs installs a fresh snapshot of the watched pages; d.mu is held.
func (d *Device) publishUARs() {
	list := make([]*UAR, 0, len(d.uars))
	for _, u := range d.uars {
		list = append(list, u)
	}
	// In index order: the watcher's pass reads the pages in list order, and a stepped
	// device (Config.Stepped) must consume the doorbells of one pass in the same order on
	// every run.
	slices.SortFunc(list, func(a, b *UAR) int { return cmp.Compare(a.Index, b.Index) })
	d.uarList.Store(&list)
}

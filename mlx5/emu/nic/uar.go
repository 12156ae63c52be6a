package nic

import (
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
	// bf holds, for each blue-flame register, the QP whose doorbells it carries.
	bf     [BfregsPerUAR]atomic.Pointer[QP]
	closed atomic.Bool
}

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
		if q := u.bf[i].Load(); q != nil {
			return newErr(op, ErrBusy, unix.EBUSY, "uar %d bfreg %d drives qp %#x", u.Index, i, q.qpn)
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
	d.uarList.Store(&list)
}

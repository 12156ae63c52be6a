package nic

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5/emu/rc"
)

// Access is a memory region's (or a QP's remote) access rights, with the values of
// enum ib_uverbs_access_flags (rdma/ib_user_ioctl_verbs.h), i.e. IBV_ACCESS_*.
type Access uint32

// Access rights.
const (
	AccessLocalWrite   Access = 1 << 0 // IB_UVERBS_ACCESS_LOCAL_WRITE
	AccessRemoteWrite  Access = 1 << 1 // IB_UVERBS_ACCESS_REMOTE_WRITE
	AccessRemoteRead   Access = 1 << 2 // IB_UVERBS_ACCESS_REMOTE_READ
	AccessRemoteAtomic Access = 1 << 3 // IB_UVERBS_ACCESS_REMOTE_ATOMIC
)

// MR is a registered memory region: a range of host memory the device may access under its
// key, for the operations its access rights allow, by QPs of the same protection domain.
// As on mlx5, the lkey and the rkey are the same mkey value.
type MR struct {
	LKey, RKey uint32
	PD         uint32
	Addr       uint64
	Length     uint64
	Access     Access
	mem        []byte
}

// mkeyTable maps mkey indexes to regions. An mkey is index<<8 | variant, as mlx5 builds it
// from the mkey index and an 8-bit key; the variant is never 0, so MLX5_INVALID_LKEY (0x100)
// and the reserved lkey 0 never name a region.
type mkeyTable struct {
	mu      sync.RWMutex
	byIndex map[uint32]*MR
	next    uint32
	variant uint8
}

func (t *mkeyTable) init() { t.byIndex = make(map[uint32]*MR) }

// RegisterMR registers length bytes of host memory at addr for protection domain pd.
// Remote write or atomic access requires local write, as ib_check_mr_access demands.
func (d *Device) RegisterMR(pd uint32, addr, length uint64, access Access) (*MR, error) {
	const op = "reg mr"
	if d.closed.Load() {
		return nil, newErr(op, ErrClosed, unix.ENODEV, "device %s", d.name)
	}
	if access&^(AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic) != 0 {
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "access %#x", uint32(access))
	}
	if access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0 {
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "remote write/atomic without local write")
	}
	if length > 1<<40 || (length > 0 && addr == 0) || addr+length < addr {
		return nil, newErr(op, ErrInvalid, unix.EINVAL, "range %#x+%#x", addr, length)
	}
	if !checkMapped(addr, length) {
		return nil, newErr(op, ErrInvalid, unix.EFAULT, "range %#x+%#x not mapped", addr, length)
	}
	t := &d.mkeys
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byIndex) >= 1<<24-2 {
		return nil, newErr(op, ErrNoSpace, unix.ENOMEM, "no free mkey")
	}
	for {
		t.next = (t.next + 1) & 0xffffff
		if t.next != 0 && t.byIndex[t.next] == nil {
			break
		}
	}
	t.variant++
	if t.variant == 0 {
		t.variant = 1
	}
	key := t.next<<8 | uint32(t.variant)
	mr := &MR{LKey: key, RKey: key, PD: pd, Addr: addr, Length: length, Access: access,
		mem: hostBytes(addr, int(length))}
	t.byIndex[t.next] = mr
	return mr, nil
}

// DeregisterMR invalidates the key; later accesses through it fail.
func (d *Device) DeregisterMR(key uint32) error {
	t := &d.mkeys
	t.mu.Lock()
	defer t.mu.Unlock()
	mr := t.byIndex[key>>8]
	if mr == nil || mr.LKey != key {
		return newErr("dereg mr", ErrNotFound, unix.EINVAL, "key %#x", key)
	}
	delete(t.byIndex, key>>8)
	return nil
}

// LookupMR returns the region registered under key.
func (d *Device) LookupMR(key uint32) (*MR, bool) {
	t := &d.mkeys
	t.mu.RLock()
	mr := t.byIndex[key>>8]
	t.mu.RUnlock()
	if mr == nil || mr.LKey != key {
		return nil, false
	}
	return mr, true
}

// slice returns the region's bytes [addr, addr+n) or false when the range is outside it.
func (mr *MR) slice(addr uint64, n uint64) ([]byte, bool) {
	if addr < mr.Addr || n > mr.Length || addr-mr.Addr > mr.Length-n {
		return nil, false
	}
	off := addr - mr.Addr
	return mr.mem[off : off+n : off+n], true
}

// localAccess resolves a local gather/scatter entry of a WQE of a QP in protection domain pd:
// the key must name a region of that PD that covers the range, and a scatter (write) needs
// local write. Any failure is a local protection error, as the hardware reports it.
func (d *Device) localAccess(pd, lkey uint32, addr uint64, n uint32, write bool) ([]byte, bool) {
	mr, ok := d.LookupMR(lkey)
	if !ok || mr.PD != pd {
		return nil, false
	}
	if write && mr.Access&AccessLocalWrite == 0 {
		return nil, false
	}
	return mr.slice(addr, uint64(n))
}

// remoteAccess resolves an incoming request's rkey for a QP in protection domain pd.
func (d *Device) remoteAccess(pd, rkey uint32, va uint64, n int, access rc.Access) ([]byte, error) {
	mr, ok := d.LookupMR(rkey)
	if !ok || mr.PD != pd || n < 0 {
		return nil, rc.ErrAccess
	}
	var need Access
	if access&rc.AccessRemoteWrite != 0 {
		need |= AccessRemoteWrite
	}
	if access&rc.AccessRemoteRead != 0 {
		need |= AccessRemoteRead
	}
	if access&rc.AccessRemoteAtomic != 0 {
		need |= AccessRemoteAtomic
	}
	if mr.Access&need != need {
		return nil, rc.ErrAccess
	}
	b, ok := mr.slice(va, uint64(n))
	if !ok {
		return nil, rc.ErrAccess
	}
	return b, nil
}

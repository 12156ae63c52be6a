package failover

import (
	"fmt"
	"sync/atomic"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// PD is a protection domain with its shadow on the backup device.
type PD struct {
	c   *Context
	def *provider.PD
	bk  []atomic.Pointer[provider.PD] // one per backup device
}

// AllocPD is ibv_alloc_pd; the backup PD is allocated by the shadow goroutine.
func (c *Context) AllocPD() (verbs.PD, error) {
	d, err := as[*provider.PD](c.def.AllocPD())
	if err != nil {
		return nil, fmt.Errorf("failover: alloc_pd: %w", err)
	}
	p := &PD{c: c, def: d, bk: make([]atomic.Pointer[provider.PD], len(c.bks))}
	c.record("alloc_pd", func(bd *backupDev) error {
		b, err := as[*provider.PD](bd.ctx.AllocPD())
		if err != nil {
			return err
		}
		p.bk[bd.idx].Store(b)
		return nil
	})
	return p, nil
}

// Default is the default provider PD.
func (p *PD) Default() *provider.PD { return p.def }

// Dealloc is ibv_dealloc_pd on both devices.
func (p *PD) Dealloc() error {
	if err := p.def.Dealloc(); err != nil {
		return fmt.Errorf("failover: dealloc_pd: %w", err)
	}
	p.c.record("dealloc_pd", func(bd *backupDev) error {
		if b := p.bk[bd.idx].Swap(nil); b != nil {
			return b.Dealloc()
		}
		return nil
	})
	return nil
}

// MR is a memory region registered on both devices over the same memory. Its keys are the
// default device's, the ones the application uses.
type MR struct {
	pd  *PD
	def *provider.MR
	bk  []atomic.Pointer[provider.MR] // one per backup device
}

// RegMR is ibv_reg_mr; the shadow registers the same memory with the backup PD, keeps the
// lkey mapping and publishes mr/<default GID>/<rkey> → backup rkey in the KV store.
func (p *PD) RegMR(b []byte, access verbs.Access) (verbs.MR, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("failover: reg_mr: %w: empty buffer", verbs.ErrInvalidArgument)
	}
	return p.RegMRIOVA(b, sliceAddr(b), access)
}

// RegMRIOVA is ibv_reg_mr_iova2; the backup MR is registered at the same iova, so a remote
// address valid on the default NIC is valid on the backup.
func (p *PD) RegMRIOVA(b []byte, iova uint64, access verbs.Access) (verbs.MR, error) {
	d, err := as[*provider.MR](p.def.RegMRIOVA(b, iova, access))
	if err != nil {
		return nil, fmt.Errorf("failover: reg_mr: %w", err)
	}
	c := p.c
	m := &MR{pd: p, def: d, bk: make([]atomic.Pointer[provider.MR], len(c.bks))}
	c.record("reg_mr", func(bd *backupDev) error {
		if m.bk[bd.idx].Load() == nil {
			bpd := p.bk[bd.idx].Load()
			if bpd == nil {
				return fmt.Errorf("%w: backup PD missing", ErrBackupNotReady)
			}
			bm, err := as[*provider.MR](bpd.RegMRIOVA(b, iova, access))
			if err != nil {
				return err
			}
			m.bk[bd.idx].Store(bm)
			bd.setLKey(d.LKey(), bm.LKey())
		}
		bm := m.bk[bd.idx].Load()
		ctx, cancel := c.kvCtx()
		defer cancel()
		e := mrEntry{defGID: c.gid, defRKey: d.RKey(), backupRKey: bm.RKey(), iova: iova, length: uint64(len(b))}
		v := e.marshal()
		if err := c.opts.KV.Put(ctx, c.mrKeyN(bd.idx, c.gid, d.RKey()), v); err != nil {
			// The store may come back: keep the verb and retry it.
			return fmt.Errorf("%w: %w", errNotYet, err)
		}
		return nil
	})
	return m, nil
}

// LKey is the default MR's local key.
func (m *MR) LKey() uint32 { return m.def.LKey() }

// RKey is the default MR's remote key (the one peers use; SHIFT maps it to the backup's).
func (m *MR) RKey() uint32 { return m.def.RKey() }

// Addr is the first byte's address in this process.
func (m *MR) Addr() uint64 { return m.def.Addr() }

// IOVA is where the HCAs see the first byte.
func (m *MR) IOVA() uint64 { return m.def.IOVA() }

// Len is the registered length.
func (m *MR) Len() uint64 { return m.def.Len() }

// Bytes is the registered memory.
func (m *MR) Bytes() []byte { return m.def.Bytes() }

// SGE returns the scatter/gather entry for b[off:off+n] of the region (default lkey).
func (m *MR) SGE(off, n int) verbs.SGE { return m.def.SGE(off, n) }

// Dereg is ibv_dereg_mr on both devices.
func (m *MR) Dereg() error {
	if err := m.def.Dereg(); err != nil {
		return fmt.Errorf("failover: dereg_mr: %w", err)
	}
	c := m.pd.c
	lk, rk := m.def.LKey(), m.def.RKey()
	c.record("dereg_mr", func(bd *backupDev) error {
		bd.dropLKey(lk)
		ctx, cancel := c.kvCtx()
		defer cancel()
		_ = c.opts.KV.Delete(ctx, c.mrKeyN(bd.idx, c.gid, rk))
		if b := m.bk[bd.idx].Swap(nil); b != nil {
			return b.Dereg()
		}
		return nil
	})
	return nil
}

package failover

import (
	"fmt"
	"sync/atomic"

	"github.com/shift-rdma/shift/provider"
)

// PD is a protection domain with its shadow on the backup device.
type PD struct {
	c   *Context
	def *provider.PD
	bk  atomic.Pointer[provider.PD]
}

// AllocPD is ibv_alloc_pd; the backup PD is allocated by the shadow goroutine.
func (c *Context) AllocPD() (*PD, error) {
	d, err := c.def.AllocPD()
	if err != nil {
		return nil, fmt.Errorf("failover: alloc_pd: %w", err)
	}
	p := &PD{c: c, def: d}
	c.bk.record("alloc_pd", func() error {
		b, err := c.bk.ctx.AllocPD()
		if err != nil {
			return err
		}
		p.bk.Store(b)
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
	p.c.bk.record("dealloc_pd", func() error {
		if b := p.bk.Swap(nil); b != nil {
			return b.Dealloc()
		}
		return nil
	})
	return nil
}

// MR is a memory region registered on both devices over the same memory. LKey and RKey are
// the default device's keys, the ones the application uses.
type MR struct {
	LKey   uint32
	RKey   uint32
	Addr   uint64
	Length uint64

	pd  *PD
	def *provider.MR
	bk  atomic.Pointer[provider.MR]
}

// RegMR is ibv_reg_mr; the shadow registers the same memory with the backup PD, keeps the
// lkey mapping and publishes mr/<default GID>/<rkey> → backup rkey in the KV store.
func (p *PD) RegMR(b []byte, access uint32) (*MR, error) {
	d, err := p.def.RegMR(b, access)
	if err != nil {
		return nil, fmt.Errorf("failover: reg_mr: %w", err)
	}
	m := &MR{LKey: d.LKey, RKey: d.RKey, Addr: d.Addr, Length: d.Length, pd: p, def: d}
	c := p.c
	c.bk.record("reg_mr", func() error {
		if m.bk.Load() == nil {
			bpd := p.bk.Load()
			if bpd == nil {
				return fmt.Errorf("%w: backup PD missing", ErrBackupNotReady)
			}
			bm, err := bpd.RegMR(b, access)
			if err != nil {
				return err
			}
			m.bk.Store(bm)
			c.lkeys.Store(d.LKey, bm.LKey)
		}
		bm := m.bk.Load()
		ctx, cancel := c.kvCtx()
		defer cancel()
		v := []byte{byte(bm.RKey >> 24), byte(bm.RKey >> 16), byte(bm.RKey >> 8), byte(bm.RKey)}
		if err := c.opts.KV.Put(ctx, c.mrKey(c.gid, d.RKey), v); err != nil {
			// The store may come back: keep the verb and retry it.
			return fmt.Errorf("%w: %w", errNotYet, err)
		}
		return nil
	})
	return m, nil
}

// Bytes is the registered memory.
func (m *MR) Bytes() []byte { return m.def.Bytes() }

// SGE returns the scatter/gather entry for b[off:off+n] of the region (default lkey).
func (m *MR) SGE(off, n int) SGE { return m.def.SGE(off, n) }

// Dereg is ibv_dereg_mr on both devices.
func (m *MR) Dereg() error {
	if err := m.def.Dereg(); err != nil {
		return fmt.Errorf("failover: dereg_mr: %w", err)
	}
	c := m.pd.c
	c.bk.record("dereg_mr", func() error {
		c.lkeys.Delete(m.LKey)
		ctx, cancel := c.kvCtx()
		defer cancel()
		_ = c.opts.KV.Delete(ctx, c.mrKey(c.gid, m.RKey))
		if b := m.bk.Swap(nil); b != nil {
			return b.Dereg()
		}
		return nil
	})
	return nil
}

package provider

import (
	"fmt"

	"github.com/shift-rdma/shift/uverbs"
)

// AllocPD is ibv_alloc_pd.
func (c *Context) AllocPD() (*PD, error) {
	h, err := uverbs.AllocPD(c.f, nil, nil)
	if err != nil {
		return nil, opError("alloc pd", err)
	}
	return &PD{ctx: c, handle: h}, nil
}

// PD is a protection domain.
type PD struct {
	ctx    *Context
	handle uint32
}

// Dealloc is ibv_dealloc_pd; the kernel refuses (EBUSY) while MRs or QPs use the PD.
func (p *PD) Dealloc() error {
	return opError("dealloc pd", uverbs.DeallocPD(p.ctx.f, uverbs.DriverIDMLX5, p.handle))
}

// Access flags of MRs and QPs (enum ibv_access_flags).
const (
	AccessLocalWrite   = uverbs.AccessLocalWrite
	AccessRemoteWrite  = uverbs.AccessRemoteWrite
	AccessRemoteRead   = uverbs.AccessRemoteRead
	AccessRemoteAtomic = uverbs.AccessRemoteAtomic
)

// MR is a registered memory region.
type MR struct {
	pd     *PD
	handle uint32
	LKey   uint32
	RKey   uint32
	Addr   uint64 // first byte (also the HCA virtual address remote peers use)
	Length uint64
	buf    []byte
}

// RegMR is ibv_reg_mr over b with access (Access* flags). b must stay mapped and must not move
// while registered: use a Buffer, or other memory outside the Go heap; Go-heap memory must be
// pinned by the caller (runtime.Pinner) for the MR's lifetime (see Buffer).
func (p *PD) RegMR(b []byte, access uint32) (*MR, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("provider: reg mr: %w: empty buffer", ErrInvalidArgument)
	}
	a := sliceAddr(b)
	m, err := uverbs.RegMR(p.ctx.f, uverbs.RegMRRequest{Start: a, Length: uint64(len(b)), HCAVA: a, PD: p.handle, Access: access}, nil, nil)
	if err != nil {
		return nil, opError("reg mr", err)
	}
	return &MR{pd: p, handle: m.Handle, LKey: m.LKey, RKey: m.RKey, Addr: a, Length: uint64(len(b)), buf: b}, nil
}

// Bytes is the registered memory.
func (m *MR) Bytes() []byte { return m.buf }

// SGE returns the scatter/gather entry for b[off:off+n] of the region.
func (m *MR) SGE(off, n int) SGE {
	return SGE{Addr: m.Addr + uint64(off), Length: uint32(n), LKey: m.LKey}
}

// Dereg is ibv_dereg_mr.
func (m *MR) Dereg() error {
	return opError("dereg mr", uverbs.DeregMR(m.pd.ctx.f, uverbs.DriverIDMLX5, m.handle))
}

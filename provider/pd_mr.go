package provider

import (
	"fmt"

	"github.com/shift-rdma/shift/provider/verbs"
	"github.com/shift-rdma/shift/uverbs"
)

// AllocPD is ibv_alloc_pd.
func (c *Context) AllocPD() (verbs.PD, error) {
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
	return opError("dealloc pd", p.ctx.cmdDeallocPD(p.handle))
}

// MR is a registered memory region.
type MR struct {
	pd     *PD
	handle uint32
	lkey   uint32
	rkey   uint32
	addr   uint64 // first byte in this process
	iova   uint64 // where the HCA sees it
	buf    []byte
}

// RegMR is ibv_reg_mr over b with access. b must stay mapped and must not move while
// registered: use a Buffer, or other memory outside the Go heap; Go-heap memory must be pinned
// by the caller (runtime.Pinner) for the MR's lifetime (see Buffer).
func (p *PD) RegMR(b []byte, access verbs.Access) (verbs.MR, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("provider: reg mr: %w: empty buffer", verbs.ErrInvalidArgument)
	}
	return p.RegMRIOVA(b, sliceAddr(b), access)
}

// RegMRIOVA is ibv_reg_mr_iova2: b is seen by the HCA (and by peers through the rkey) at iova.
func (p *PD) RegMRIOVA(b []byte, iova uint64, access verbs.Access) (verbs.MR, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("provider: reg mr: %w: empty buffer", verbs.ErrInvalidArgument)
	}
	a := sliceAddr(b)
	m, err := uverbs.RegMR(p.ctx.f, uverbs.RegMRRequest{Start: a, Length: uint64(len(b)), HCAVA: iova, PD: p.handle, Access: uint32(access)}, nil, nil)
	if err != nil {
		return nil, opError("reg mr", err)
	}
	return &MR{pd: p, handle: m.Handle, lkey: m.LKey, rkey: m.RKey, addr: a, iova: iova, buf: b}, nil
}

// LKey is the local key.
func (m *MR) LKey() uint32 { return m.lkey }

// RKey is the remote key.
func (m *MR) RKey() uint32 { return m.rkey }

// Addr is the first byte's address in this process.
func (m *MR) Addr() uint64 { return m.addr }

// IOVA is where the HCA and remote peers see the first byte.
func (m *MR) IOVA() uint64 { return m.iova }

// Len is the registered length.
func (m *MR) Len() uint64 { return uint64(len(m.buf)) }

// Bytes is the registered memory.
func (m *MR) Bytes() []byte { return m.buf }

// SGE returns the scatter/gather entry for b[off:off+n] of the region.
func (m *MR) SGE(off, n int) verbs.SGE {
	return verbs.SGE{Addr: m.addr + uint64(off), Length: uint32(n), LKey: m.lkey}
}

// Dereg is ibv_dereg_mr.
func (m *MR) Dereg() error {
	return opError("dereg mr", m.pd.ctx.cmdDeregMR(m.handle))
}

package demo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// verbsStack opens Sides through the verbs contract: one context and PD per host (opened on
// first use by openHost), one CQ, QP and MR per Side. The plain provider and SHIFT differ only
// in how a host's context is opened and in the hooks.
type verbsStack struct {
	name     string
	cfg      SideConfig
	openHost func(host int) (verbs.Context, error)
	// ready, summary and settle are the mode's hooks: Ready's wait, Summary's text, and a
	// wait for the background work a destroy phase started (nil: nothing to wait for).
	ready   func(ctx context.Context, hosts []verbs.Context) error
	summary func(hosts []verbs.Context) string
	settle  func(hosts []verbs.Context) error

	mu    sync.Mutex
	hosts []*stackHost
	sides []*side
	// bufs are freed by Close after the contexts: SHIFT destroys the backup QPs and MRs in
	// its background goroutine, so an emulated backup NIC may still read a Side's memory
	// after the Side's Close returned.
	bufs []*provider.Buffer
}

type stackHost struct {
	ctx verbs.Context
	pd  verbs.PD
	gid [16]byte
}

var psnSeq atomic.Uint32

func (s *verbsStack) Name() string { return s.name }

func (s *verbsStack) host(h int) (*stackHost, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h < 0 || h >= len(s.hosts) {
		return nil, fmt.Errorf("demo: %s stack: no host %d", s.name, h)
	}
	if s.hosts[h] != nil {
		return s.hosts[h], nil
	}
	c, err := s.openHost(h)
	if err != nil {
		return nil, fmt.Errorf("demo: host %d: %w", h, err)
	}
	hh := &stackHost{ctx: c}
	if hh.pd, err = c.AllocPD(); err != nil {
		return nil, errors.Join(fmt.Errorf("demo: host %d: alloc pd: %w", h, err), c.Close())
	}
	a := s.cfg.Attr.Defaults()
	gs, err := c.GIDs()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("demo: host %d: gid: %w", h, err), hh.pd.Dealloc(), c.Close())
	}
	g, ok := verbs.FindGID(gs, a.Port, int(a.GIDIndex))
	if !ok {
		return nil, errors.Join(fmt.Errorf("demo: host %d: no GID %d on port %d", h, a.GIDIndex, a.Port), hh.pd.Dealloc(), c.Close())
	}
	hh.gid = g.GID
	s.hosts[h] = hh
	return hh, nil
}

func (s *verbsStack) contexts() []verbs.Context {
	var cs []verbs.Context
	for _, h := range s.hosts {
		if h != nil {
			cs = append(cs, h.ctx)
		}
	}
	return cs
}

func (s *verbsStack) Open(host, size int) (Side, error) {
	h, err := s.host(host)
	if err != nil {
		return nil, err
	}
	b, err := provider.NewBuffer(size)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	p := &side{attr: s.cfg.Attr, buf: b}
	s.mu.Lock()
	s.bufs = append(s.bufs, b)
	s.sides = append(s.sides, p)
	s.mu.Unlock()
	if err := p.open(h, s.cfg); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	return p, nil
}

// Ready waits for the mode's background work (SHIFT: the backup QPs connected).
func (s *verbsStack) Ready(ctx context.Context) error {
	if s.ready == nil {
		return nil
	}
	s.mu.Lock()
	cs := s.contexts()
	s.mu.Unlock()
	return s.ready(ctx, cs)
}

// Summary is what the mode did behind the application's back ("" for the plain provider).
func (s *verbsStack) Summary() string {
	if s.summary == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.summary(s.contexts())
}

// Close closes every Side still open (QPs of all Sides first, then their MRs and CQs, each
// phase settled before the next), deallocates the PDs, closes the contexts, then frees the
// Sides' memory.
func (s *verbsStack) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	settle := func() {
		if s.settle != nil {
			errs = append(errs, s.settle(s.contexts()))
		}
	}
	for _, p := range s.sides {
		errs = append(errs, p.closeQP())
	}
	settle()
	for _, p := range s.sides {
		errs = append(errs, p.Close())
	}
	s.sides = nil
	settle()
	for _, h := range s.hosts {
		if h != nil {
			errs = append(errs, h.pd.Dealloc())
		}
	}
	settle()
	for i, h := range s.hosts {
		if h != nil {
			errs = append(errs, h.ctx.Close())
			s.hosts[i] = nil
		}
	}
	for _, b := range s.bufs {
		errs = append(errs, b.Free())
	}
	s.bufs = nil
	return errors.Join(errs...)
}

// side is one Side: a QP with its own CQ and a registered buffer, on a host's context.
type side struct {
	attr verbs.ConnectAttr
	buf  *provider.Buffer
	cq   verbs.CQ
	qp   verbs.QP
	mr   verbs.MR
	ep   verbs.Endpoint
}

func (p *side) open(h *stackHost, cfg SideConfig) error {
	var err error
	if p.cq, err = h.ctx.CreateCQ(verbs.CQInitAttr{CQE: cfg.CQE}); err != nil {
		return fmt.Errorf("demo: create cq: %w", err)
	}
	if p.qp, err = h.pd.CreateQP(verbs.QPInitAttr{SendCQ: p.cq, RecvCQ: p.cq, Cap: cfg.Cap}); err != nil {
		return fmt.Errorf("demo: create qp: %w", err)
	}
	if p.mr, err = h.pd.RegMR(p.buf.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead); err != nil {
		return fmt.Errorf("demo: reg mr: %w", err)
	}
	p.ep = verbs.Endpoint{QPN: p.qp.QPN(), PSN: psnSeq.Add(0x10001) & 0xffffff, GID: h.gid}
	return nil
}

func (p *side) PostSend(wrs []verbs.SendWR) error { return p.qp.PostSend(wrs) }
func (p *side) PostRecv(wrs []verbs.RecvWR) error { return p.qp.PostRecv(wrs) }
func (p *side) Poll(wcs []verbs.WC) (int, error)  { return p.cq.Poll(wcs) }
func (p *side) Buf() []byte                       { return p.mr.Bytes() }
func (p *side) LKey() uint32                      { return p.mr.LKey() }
func (p *side) RKey() uint32                      { return p.mr.RKey() }
func (p *side) Addr() uint64                      { return p.mr.Addr() }
func (p *side) Endpoint() verbs.Endpoint          { return p.ep }
func (p *side) Connect(remote verbs.Endpoint) error {
	return verbs.Connect(p.qp, p.attr, p.ep, remote)
}

func (p *side) closeQP() error {
	if p.qp == nil {
		return nil
	}
	err := p.qp.Destroy()
	p.qp = nil
	return err
}

// Close destroys the QP, MR and CQ; it is idempotent and safe on a partly opened side (the
// stack's Close closes every Side it opened and frees the memory).
func (p *side) Close() error {
	errs := []error{p.closeQP()}
	if p.mr != nil {
		errs = append(errs, p.mr.Dereg())
		p.mr = nil
	}
	if p.cq != nil {
		errs = append(errs, p.cq.Destroy())
		p.cq = nil
	}
	return errors.Join(errs...)
}

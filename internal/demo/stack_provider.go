package demo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/shift-rdma/shift/provider"
)

// providerStack is the baseline: the plain provider on each host's default NIC.
type providerStack struct {
	devs  [][]string // devs[host][nic]
	cfg   SideConfig
	mu    sync.Mutex
	sides []*providerSide
}

// NewProviderStack opens Sides with package provider on devs[host][0].
func NewProviderStack(devs [][]string, cfg SideConfig) (Stack, error) {
	if len(devs) < 2 {
		return nil, fmt.Errorf("demo: provider stack: %d hosts, want 2", len(devs))
	}
	return &providerStack{devs: devs, cfg: cfg}, nil
}

func (s *providerStack) Name() string { return string(ModeProvider) }

// Close closes the Sides still open.
func (s *providerStack) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, p := range s.sides {
		errs = append(errs, p.Close())
	}
	s.sides = nil
	return errors.Join(errs...)
}

// Ready has nothing to wait for: a connected provider QP carries traffic at once.
func (s *providerStack) Ready(context.Context) error { return nil }

// Summary is empty: the plain provider does nothing behind the application's back.
func (s *providerStack) Summary() string { return "" }

var psnSeq atomic.Uint32

func (s *providerStack) Open(host, size int) (Side, error) {
	if host < 0 || host >= len(s.devs) || len(s.devs[host]) == 0 {
		return nil, fmt.Errorf("demo: provider stack: no host %d", host)
	}
	p := &providerSide{attr: s.cfg.Attr}
	if err := p.open(s.devs[host][0], size, s.cfg); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	s.mu.Lock()
	s.sides = append(s.sides, p)
	s.mu.Unlock()
	return p, nil
}

type providerSide struct {
	attr provider.ConnectAttr
	ctx  *provider.Context
	pd   *provider.PD
	cq   *provider.CQ
	qp   *provider.QP
	buf  *provider.Buffer
	mr   *provider.MR
	ep   provider.Endpoint
}

func (p *providerSide) open(dev string, size int, cfg SideConfig) error {
	var err error
	if p.ctx, err = provider.Open(dev); err != nil {
		return fmt.Errorf("demo: open %s: %w", dev, err)
	}
	if p.pd, err = p.ctx.AllocPD(); err != nil {
		return fmt.Errorf("demo: %s: alloc pd: %w", dev, err)
	}
	if p.cq, err = p.ctx.CreateCQ(cfg.CQE, nil, 0); err != nil {
		return fmt.Errorf("demo: %s: create cq: %w", dev, err)
	}
	if p.qp, err = p.pd.CreateQP(provider.QPInitAttr{SendCQ: p.cq, RecvCQ: p.cq, Cap: cfg.Cap}); err != nil {
		return fmt.Errorf("demo: %s: create qp: %w", dev, err)
	}
	if p.buf, err = provider.NewBuffer(size); err != nil {
		return fmt.Errorf("demo: %s: %w", dev, err)
	}
	if p.mr, err = p.pd.RegMR(p.buf.Bytes(), provider.AccessLocalWrite|provider.AccessRemoteWrite|provider.AccessRemoteRead); err != nil {
		return fmt.Errorf("demo: %s: reg mr: %w", dev, err)
	}
	a := cfg.Attr.Defaults()
	g, err := p.ctx.GIDByIndex(a.Port, int(a.GIDIndex))
	if err != nil {
		return fmt.Errorf("demo: %s: gid: %w", dev, err)
	}
	p.ep = provider.Endpoint{QPN: p.qp.QPN(), PSN: (psnSeq.Add(0x10001)) & 0xffffff, GID: g.GID}
	return nil
}

func (p *providerSide) PostSend(wrs []provider.SendWR) error { return p.qp.PostSend(wrs) }
func (p *providerSide) PostRecv(wrs []provider.RecvWR) error { return p.qp.PostRecv(wrs) }
func (p *providerSide) Poll(wcs []provider.WC) (int, error)  { return p.cq.Poll(wcs) }
func (p *providerSide) Buf() []byte                          { return p.mr.Bytes() }
func (p *providerSide) LKey() uint32                         { return p.mr.LKey }
func (p *providerSide) RKey() uint32                         { return p.mr.RKey }
func (p *providerSide) Addr() uint64                         { return p.mr.Addr }
func (p *providerSide) Endpoint() provider.Endpoint          { return p.ep }
func (p *providerSide) Connect(remote provider.Endpoint) error {
	return p.qp.Connect(p.attr, p.ep, remote)
}

// Close destroys in libibverbs order; it is safe on a partly opened side.
func (p *providerSide) Close() error {
	var errs []error
	if p.qp != nil {
		errs = append(errs, p.qp.Destroy())
		p.qp = nil
	}
	if p.mr != nil {
		errs = append(errs, p.mr.Dereg())
		p.mr = nil
	}
	if p.cq != nil {
		errs = append(errs, p.cq.Destroy())
		p.cq = nil
	}
	if p.pd != nil {
		errs = append(errs, p.pd.Dealloc())
		p.pd = nil
	}
	if p.ctx != nil {
		errs = append(errs, p.ctx.Close())
		p.ctx = nil
	}
	// Memory goes last, once nothing on the device can still read it.
	if p.buf != nil {
		errs = append(errs, p.buf.Free())
		p.buf = nil
	}
	return errors.Join(errs...)
}

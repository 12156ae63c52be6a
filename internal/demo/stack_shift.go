package demo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/provider"
)

// shiftStack runs the workload through package failover: one failover Context per host with
// NIC 0 as the default device and NIC 1 as its backup, one in-process KV store shared by both
// hosts (they live in one process), and a job name of its own.
type shiftStack struct {
	devs [][]string
	cfg  SideConfig
	kv   kv.Store
	job  string

	mu    sync.Mutex
	hosts []*shiftHost
	// bufs are freed by Close after the contexts: the failover destroys the backup QPs and
	// MRs in its background goroutine, so the emulated backup NIC may still read a Side's
	// memory after the Side's Close returned.
	bufs []*failover.Buffer
	// sides are every Side opened, closed in phases by Close (all QPs first).
	sides []*shiftSide
}

type shiftHost struct {
	ctx *failover.Context
	pd  *failover.PD
	gid [16]byte
}

var jobSeq atomic.Uint64

// NewShiftStack is the one constructor of the shift mode: Sides on each host's default NIC
// (devs[host][0]) that fail over to its next NIC (devs[host][1]) through package failover.
func NewShiftStack(devs [][]string, cfg SideConfig) (Stack, error) {
	if len(devs) < 2 {
		return nil, fmt.Errorf("demo: shift stack: %d hosts, want 2", len(devs))
	}
	for h, d := range devs {
		if len(d) < 2 {
			return nil, fmt.Errorf("demo: shift stack: host %d has %d NICs, the failover needs a backup", h, len(d))
		}
	}
	return &shiftStack{devs: devs, cfg: cfg, kv: kv.NewMem(), job: fmt.Sprintf("demo-%d", jobSeq.Add(1)),
		hosts: make([]*shiftHost, len(devs))}, nil
}

func (s *shiftStack) Name() string { return string(ModeShift) }

func (s *shiftStack) host(h int) (*shiftHost, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hosts[h] != nil {
		return s.hosts[h], nil
	}
	a := s.cfg.Attr.Defaults()
	c, err := failover.Open(s.devs[h][0], failover.Options{Backups: s.devs[h][1:2], KV: s.kv, Job: s.job,
		Port: a.Port, GIDIndex: int(a.GIDIndex)})
	if err != nil {
		return nil, fmt.Errorf("demo: host %d: %w", h, err)
	}
	hh := &shiftHost{ctx: c}
	if hh.pd, err = c.AllocPD(); err != nil {
		return nil, errors.Join(fmt.Errorf("demo: host %d: alloc pd: %w", h, err), c.Close())
	}
	g, err := c.GIDByIndex(a.Port, int(a.GIDIndex))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("demo: host %d: gid: %w", h, err), hh.pd.Dealloc(), c.Close())
	}
	hh.gid = g.GID
	s.hosts[h] = hh
	return hh, nil
}

func (s *shiftStack) Open(host, size int) (Side, error) {
	if host < 0 || host >= len(s.devs) {
		return nil, fmt.Errorf("demo: shift stack: no host %d", host)
	}
	h, err := s.host(host)
	if err != nil {
		return nil, err
	}
	b, err := failover.NewBuffer(size)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	p := &shiftSide{attr: s.cfg.Attr, buf: b}
	s.mu.Lock()
	s.bufs = append(s.bufs, b)
	s.sides = append(s.sides, p)
	s.mu.Unlock()
	if err := p.open(h, s.cfg); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	return p, nil
}

// Ready waits until both hosts' backup devices have replayed every control verb (backup QPs
// connected), so the failure can come at any time.
func (s *shiftStack) Ready(ctx context.Context) error {
	s.mu.Lock()
	hosts := append([]*shiftHost(nil), s.hosts...)
	s.mu.Unlock()
	for i, h := range hosts {
		if h == nil {
			continue
		}
		if err := h.ctx.WaitShadow(ctx); err != nil {
			return fmt.Errorf("demo: host %d: shadow verbs: %w", i, err)
		}
	}
	return nil
}

// Summary adds up both hosts' failover counters.
func (s *shiftStack) Summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var t failover.Stats
	for _, h := range s.hosts {
		if h == nil {
			continue
		}
		st := h.ctx.Stats()
		t.Fallbacks += st.Fallbacks
		t.Refused += st.Refused
		t.Reposted += st.Reposted
		t.Skipped += st.Skipped
		t.Recoveries += st.Recoveries
		t.RecvRecoveries += st.RecvRecoveries
		t.Probes += st.Probes
		t.SwitchBack += st.SwitchBack
		t.Stall += st.Stall
	}
	out := fmt.Sprintf("failover: %d QP fallbacks, %d refused, %d send WRs reposted on the backup, %d treated as already received",
		t.Fallbacks, t.Refused, t.Reposted, t.Skipped)
	if t.Recoveries > 0 {
		n := time.Duration(t.Recoveries)
		out += fmt.Sprintf("; %d send and %d receive sides back on the default NIC after %d probes (mean switch-back %v, mean stall %v)",
			t.Recoveries, t.RecvRecoveries, t.Probes, (t.SwitchBack / n).Round(time.Microsecond), (t.Stall / n).Round(time.Microsecond))
	}
	return out
}

// Close closes every Side still open (QPs of all Sides first), deallocates the PDs, closes
// the contexts, then frees the Sides' memory.
func (s *shiftStack) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	// Let each backup device's goroutine replay the recorded destroys before the contexts
	// close, so the backup objects go in order rather than all at once.
	wait := func(h *shiftHost) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return h.ctx.WaitShadow(ctx)
	}
	waitAll := func() {
		for _, h := range s.hosts {
			if h != nil {
				errs = append(errs, wait(h))
			}
		}
	}
	// Every QP first (their flushes may still raise completion events on the backup CQs),
	// then MRs and CQs, each phase replayed on the backup devices before the next.
	for _, p := range s.sides {
		errs = append(errs, p.closeQP())
	}
	waitAll()
	for _, p := range s.sides {
		errs = append(errs, p.Close())
	}
	s.sides = nil
	waitAll()
	for i, h := range s.hosts {
		if h == nil {
			continue
		}
		errs = append(errs, h.pd.Dealloc(), wait(h), h.ctx.Close())
		s.hosts[i] = nil
	}
	for _, b := range s.bufs {
		errs = append(errs, b.Free())
	}
	s.bufs = nil
	return errors.Join(errs...)
}

type shiftSide struct {
	attr provider.ConnectAttr
	cq   *failover.CQ
	qp   *failover.QP
	buf  *failover.Buffer
	mr   *failover.MR
	ep   provider.Endpoint
}

func (p *shiftSide) open(h *shiftHost, cfg SideConfig) error {
	var err error
	if p.cq, err = h.ctx.CreateCQ(cfg.CQE); err != nil {
		return fmt.Errorf("demo: create cq: %w", err)
	}
	if p.qp, err = h.pd.CreateQP(failover.QPInitAttr{SendCQ: p.cq, RecvCQ: p.cq, Cap: cfg.Cap}); err != nil {
		return fmt.Errorf("demo: create qp: %w", err)
	}
	if p.mr, err = h.pd.RegMR(p.buf.Bytes(), failover.AccessLocalWrite|failover.AccessRemoteWrite|failover.AccessRemoteRead); err != nil {
		return fmt.Errorf("demo: reg mr: %w", err)
	}
	p.ep = provider.Endpoint{QPN: p.qp.QPN(), PSN: psnSeq.Add(0x10001) & 0xffffff, GID: h.gid}
	return nil
}

func (p *shiftSide) PostSend(wrs []provider.SendWR) error { return p.qp.PostSend(wrs) }
func (p *shiftSide) PostRecv(wrs []provider.RecvWR) error { return p.qp.PostRecv(wrs) }
func (p *shiftSide) Poll(wcs []provider.WC) (int, error)  { return p.cq.Poll(wcs) }
func (p *shiftSide) Buf() []byte                          { return p.mr.Bytes() }
func (p *shiftSide) LKey() uint32                         { return p.mr.LKey }
func (p *shiftSide) RKey() uint32                         { return p.mr.RKey }
func (p *shiftSide) Addr() uint64                         { return p.mr.Addr }
func (p *shiftSide) Endpoint() provider.Endpoint          { return p.ep }
func (p *shiftSide) Connect(remote provider.Endpoint) error {
	return p.qp.Connect(p.attr, p.ep, remote)
}

func (p *shiftSide) closeQP() error {
	if p.qp == nil {
		return nil
	}
	err := p.qp.Destroy()
	p.qp = nil
	return err
}

// Close destroys the QP, MR and CQ; it is idempotent, and the stack's Close closes every
// Side it opened.
func (p *shiftSide) Close() error {
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

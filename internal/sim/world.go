package sim

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Per-QP memory, in 256-byte slots of each host's buffer (one block per QP): staging for
// outgoing payloads, the peer's WRITE targets, receive buffers, a READ source the peer reads,
// landing slots for READs, and a FETCH_AND_ADD counter.
const (
	slotSize    = 256
	stageSlots  = 32 // > the SQ depth: a staged payload outlives its WR
	writeBase   = 32
	recvBase    = 64
	readSrc     = 96
	readBase    = 100
	counterSlot = 132
	blockSlots  = 136

	sqDepth = 16
	rqDepth = 16
)

// epoch is the virtual clock's start: any fixed instant, so that runs are identical.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var worlds atomic.Uint64 // distinct device names for worlds alive at once

// host is one emulated host's verbs objects.
type host struct {
	ctx *provider.Context
	pd  *provider.PD
	cq  *provider.CQ
	buf *provider.Buffer
	mr  *provider.MR
}

// World is two stepped emulated hosts with QP pairs between them.
type World struct {
	clk   *clock.Manual
	cl    *emu.Cluster
	hosts [2]*host
	ends  []*end // ends[2*i] on host 0, ends[2*i+1] on host 1: pair i
	byQPN [2]map[uint32]*end
}

func newWorld(qps int, attr verbs.ConnectAttr) (w *World, err error) {
	w = &World{clk: clock.NewManual(epoch)}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.Close())
		}
	}()
	prefix := fmt.Sprintf("sim%d_", worlds.Add(1))
	if w.cl, err = emu.NewCluster(emu.ClusterConfig{Hosts: 2, Register: true, Prefix: prefix, Clock: w.clk, Stepped: true}); err != nil {
		return nil, err
	}
	for h := range 2 {
		if w.hosts[h], err = openHost(fmt.Sprintf("%s%d", prefix, h), qps); err != nil {
			return nil, err
		}
		w.byQPN[h] = map[uint32]*end{}
	}
	for i := range qps {
		var pair [2]*end
		for h := range 2 {
			e, err := w.hosts[h].newEnd(h, i)
			if err != nil {
				return nil, err
			}
			pair[h] = e
			w.byQPN[h][e.qp.QPN()] = e
		}
		pair[0].peer, pair[1].peer = pair[1], pair[0]
		for h := range 2 {
			if err := verbs.Connect(pair[h].qp, attr, pair[h].ep, pair[1-h].ep); err != nil {
				return nil, fmt.Errorf("sim: connect pair %d host %d: %w", i, h, err)
			}
		}
		w.ends = append(w.ends, pair[0], pair[1])
	}
	return w, nil
}

func openHost(dev string, qps int) (h *host, err error) {
	h = &host{}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("sim: open %s: %w", dev, err), h.close())
		}
	}()
	if h.ctx, err = provider.Open(dev); err != nil {
		return nil, err
	}
	pd, err := h.ctx.AllocPD()
	if err != nil {
		return nil, err
	}
	h.pd = pd.(*provider.PD)
	cq, err := h.ctx.CreateCQ(verbs.CQInitAttr{CQE: 2 * qps * (sqDepth + rqDepth)})
	if err != nil {
		return nil, err
	}
	h.cq = cq.(*provider.CQ)
	if h.buf, err = provider.NewBuffer(qps * blockSlots * slotSize); err != nil {
		return nil, err
	}
	mr, err := h.pd.RegMR(h.buf.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic)
	if err != nil {
		return nil, err
	}
	h.mr = mr.(*provider.MR)
	return h, nil
}

func (h *host) newEnd(hi, i int) (*end, error) {
	qp, err := h.pd.CreateQP(verbs.QPInitAttr{SendCQ: h.cq, RecvCQ: h.cq,
		Cap: verbs.QPCap{MaxSendWR: sqDepth, MaxRecvWR: rqDepth, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return nil, err
	}
	gid, err := h.ctx.GIDByIndex(1, 0)
	if err != nil {
		return nil, errors.Join(err, qp.Destroy())
	}
	e := &end{h: h, host: hi, pair: i, qp: qp.(*provider.QP), block: i * blockSlots * slotSize}
	e.ep = verbs.Endpoint{QPN: e.qp.QPN(), PSN: uint32(0x1000*(i+1) + hi), GID: gid.GID}
	// The READ source: a pattern of this host and pair, never written afterwards.
	fill(e.slot(readSrc, slotSize), uint64(hi), uint64(i), ^uint64(0))
	return e, nil
}

func (h *host) close() error {
	var errs []error
	if h.mr != nil {
		errs = append(errs, h.mr.Dereg())
	}
	if h.buf != nil {
		h.buf.Free()
	}
	if h.cq != nil {
		errs = append(errs, h.cq.Destroy())
	}
	if h.pd != nil {
		errs = append(errs, h.pd.Dealloc())
	}
	if h.ctx != nil {
		errs = append(errs, h.ctx.Close())
	}
	return errors.Join(errs...)
}

// Close releases everything the world made.
func (w *World) Close() error {
	var errs []error
	for _, e := range w.ends {
		errs = append(errs, e.qp.Destroy())
	}
	w.ends = nil
	for _, h := range w.hosts {
		if h != nil {
			errs = append(errs, h.close())
		}
	}
	if w.cl != nil {
		errs = append(errs, w.cl.Close())
	}
	return errors.Join(errs...)
}

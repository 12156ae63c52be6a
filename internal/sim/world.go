package sim

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/nic"
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

// host is one emulated host's verbs objects, of the provider or of the failover layer.
type host struct {
	ctx  verbs.Context
	fo   *failover.Context // the failover layer's context (nil: the provider's)
	gid  [16]byte
	pd   verbs.PD
	cq   verbs.CQ // both queues' CQ, or the receive CQ in a deep run (deep.go)
	scq  verbs.CQ // the send CQ of a deep run, else nil
	buf  *provider.Buffer
	mr   verbs.MR
	nics []*nic.Device // the host's NICs: the default first
}

// World is two stepped emulated hosts with QP pairs between them.
type World struct {
	clk   *clock.Manual
	cl    *emu.Cluster
	hosts [2]*host
	ends  []*end // ends[2*i] on host 0, ends[2*i+1] on host 1: pair i
	byQPN [2]map[uint32]*end
	// unwatch stops the fabric's link watchers feeding the contexts' link events.
	unwatch []func()
	nics    []*nic.Device // every NIC, host by host
	kv      *faultKV      // the store both hosts share
	// rq is every QP's receive depth: rqDepth, or deepRQ in a deep run (deep.go).
	rq int
}

func newWorld(qps int, attr verbs.ConnectAttr, fo, recovery bool, backups int, links, recvOnly, deep bool, inline int, yield func(), dropCtl func() bool) (w *World, err error) {
	w = &World{clk: clock.NewManual(epoch), rq: rqDepth}
	if deep {
		w.rq = deepRQ
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.Close())
		}
	}()
	n := worlds.Add(1)
	prefix := fmt.Sprintf("sim%d_", n)
	nics := 1
	if fo {
		nics = 1 + backups // a default and the backups per host
	}
	if w.cl, err = emu.NewCluster(emu.ClusterConfig{Hosts: 2, NICs: nics, Register: true, Prefix: prefix, Clock: w.clk, Stepped: true}); err != nil {
		return nil, err
	}
	w.kv = &faultKV{m: kv.NewMem()} // faults drawn by the runner (kvfault.go)
	store := w.kv
	for h := range 2 {
		def := fmt.Sprintf("%s%d", prefix, h*nics)
		var opts *failover.Options
		if fo {
			var bks []string
			for b := 1; b < nics; b++ {
				bks = append(bks, fmt.Sprintf("%s%d", prefix, h*nics+b))
			}
			opts = &failover.Options{Backups: bks, KV: store,
				Job: fmt.Sprintf("sim%d", n), Clock: w.clk, Stepped: true, Yield: yield, DropControl: dropCtl,
				HandshakeTimeout: 2 * time.Second, DrainTimeout: 10 * time.Second, CQWatchdog: watchdogBound,
				// Without recovery, no probe within a run.
				ProbeInterval: time.Hour, ProbeMaxInterval: time.Hour}
			if recovery {
				// Probes every few ms of virtual time, so that QPs come back to the default
				// NIC within a run, with traffic still going.
				opts.ProbeInterval, opts.ProbeMaxInterval = 2*time.Millisecond, 20*time.Millisecond
			}
			if links {
				ch, cancel := linkEvents(w.cl.Endpoint(h, 0, 1), def)
				w.unwatch = append(w.unwatch, cancel)
				opts.LinkEvents = ch
			}
		}
		if w.hosts[h], err = openHost(def, qps, w.rq, deep, opts); err != nil {
			return nil, err
		}
		for _, d := range w.cl.Hosts[h].Devices {
			w.hosts[h].nics = append(w.hosts[h].nics, d.NIC())
			w.nics = append(w.nics, d.NIC())
		}
		w.byQPN[h] = map[uint32]*end{}
	}
	for i := range qps {
		var pair [2]*end
		for h := range 2 {
			e, err := w.hosts[h].newEnd(h, i, qps, w.rq, deep, inline)
			if err != nil {
				return nil, err
			}
			pair[h] = e
			w.byQPN[h][e.qp.QPN()] = e
		}
		pair[0].peer, pair[1].peer = pair[1], pair[0]
		for h := range 2 {
			if i == 0 && h == 1 && recvOnly {
				// Left in RTR, as perftest's bandwidth servers leave theirs.
				pair[h].recvOnly = true
				if err := verbs.ToInit(pair[h].qp, attr); err != nil {
					return nil, fmt.Errorf("sim: connect pair %d host %d: %w", i, h, err)
				}
				if err := verbs.ToRTR(pair[h].qp, attr, pair[1-h].ep); err != nil {
					return nil, fmt.Errorf("sim: connect pair %d host %d: %w", i, h, err)
				}
				continue
			}
			if err := verbs.Connect(pair[h].qp, attr, pair[h].ep, pair[1-h].ep); err != nil {
				return nil, fmt.Errorf("sim: connect pair %d host %d: %w", i, h, err)
			}
		}
		w.ends = append(w.ends, pair[0], pair[1])
	}
	return w, nil
}

func openHost(dev string, qps, rq int, deep bool, fo *failover.Options) (h *host, err error) {
	h = &host{}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("sim: open %s: %w", dev, err), h.close())
		}
	}()
	var g verbs.GID
	if fo != nil {
		if h.fo, err = failover.Open(dev, *fo); err != nil {
			return nil, err
		}
		h.ctx = h.fo
		g, err = h.fo.Default().SourceGID(1, 0)
	} else {
		var p *provider.Context
		if p, err = provider.Open(dev); err != nil {
			return nil, err
		}
		h.ctx = p
		g, err = p.GIDByIndex(1, 0)
	}
	if err != nil {
		return nil, err
	}
	h.gid = g.GID
	if h.pd, err = h.ctx.AllocPD(); err != nil {
		return nil, err
	}
	size, extra := 2*qps*(sqDepth+rq), 0
	if deep {
		// Each CQ exactly as large as its queues' WRs, the receive slots after the blocks.
		size, extra = qps*rq, qps*rq*slotSize
		if h.scq, err = h.ctx.CreateCQ(verbs.CQInitAttr{CQE: qps * deepSends}); err != nil {
			return nil, err
		}
	}
	if h.cq, err = h.ctx.CreateCQ(verbs.CQInitAttr{CQE: size}); err != nil {
		return nil, err
	}
	if h.buf, err = provider.NewBuffer(qps*blockSlots*slotSize + extra); err != nil {
		return nil, err
	}
	if h.mr, err = h.pd.RegMR(h.buf.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *host) newEnd(hi, i, qps, rq int, deep bool, inline int) (*end, error) {
	scq := h.cq
	if h.scq != nil {
		scq = h.scq
	}
	qp, err := h.pd.CreateQP(verbs.QPInitAttr{SendCQ: scq, RecvCQ: h.cq,
		Cap: verbs.QPCap{MaxSendWR: sqDepth, MaxRecvWR: uint32(rq), MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: uint32(inline)}})
	if err != nil {
		return nil, err
	}
	e := &end{h: h, host: hi, pair: i, qp: qp, block: i * blockSlots * slotSize, inline: inline, rq: rq, sqMax: sqDepth}
	e.recvOff, e.recvSlots = e.block+recvBase*slotSize, 32
	if deep {
		e.recvOff, e.recvSlots, e.sqMax = (qps*blockSlots+i*rq)*slotSize, rq, deepSends
	}
	e.ep = verbs.Endpoint{QPN: e.qp.QPN(), PSN: uint32(0x1000*(i+1) + hi), GID: h.gid}
	// The READ source: a pattern of this host and pair, never written afterwards.
	fill(e.slot(readSrc, slotSize), uint64(hi), uint64(i), ^uint64(0))
	return e, nil
}

func (h *host) close() error {
	var errs []error
	if h.mr != nil {
		errs = append(errs, h.mr.Dereg())
	}
	if h.cq != nil {
		errs = append(errs, h.cq.Destroy())
	}
	if h.scq != nil {
		errs = append(errs, h.scq.Destroy())
	}
	if h.pd != nil {
		errs = append(errs, h.pd.Dealloc())
	}
	if h.ctx != nil {
		errs = append(errs, h.ctx.Close())
	}
	if h.buf != nil {
		h.buf.Free() // after the MR and the context: the failover layer's shadows map it too
	}
	return errors.Join(errs...)
}

// Close releases everything the world made.
func (w *World) Close() error {
	for _, cancel := range w.unwatch {
		cancel()
	}
	var errs []error
	for _, e := range w.ends {
		if !e.gone {
			errs = append(errs, e.qp.Destroy())
		}
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

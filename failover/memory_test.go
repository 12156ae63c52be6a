package failover

import (
	"testing"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// setMemory is the NIC-visible memory of one backup QP set of its own: the rings of the
// backup data QP (SQ and RQ), rounded up to pages as mapped. The control QP is the
// context's, shared by every QP towards the peer (endpointMemory).
func setMemory(bs *bkSet) int { return qpRings(bs.qp.Load()) }

func qpRings(p *provider.QP) int {
	if p == nil {
		return 0
	}
	r := p.Rings()
	return pages(len(r.SQ) + len(r.RQ))
}

// endpointMemory is the memory of a shared control endpoint: its QP's rings, its CQ's ring
// and its receive buffer, each rounded up to pages.
func endpointMemory(ep *ctlEndpoint) (rings, cq, buf int) {
	if ep == nil {
		return 0, 0, 0
	}
	return qpRings(ep.qp), pages(len(ep.cq.Rings().Buf)), cap(ep.buf.Bytes())
}

func pages(n int) int { return (n + 4095) / 4096 * 4096 }

// oldCtlPerQP is what the control part of a backup set cost per QP before the control QP
// pair was shared (one control QP of 8 send and 8 receive WRs per QP and backup, whose
// completions went to the application's backup CQ, and a page of receive buffer).
const oldCtlPerQP = 4096 + 4096

// TestBackupSetMemory reports the memory of each backup QP set (the paper reports 138 KB per
// backup QP) for one and two backups, with perftest's ib_send_bw queue sizes and with the
// tests' small ones; every backup device adds one set per QP, and one shared control
// endpoint per peer context. Then it reports what the control part costs for 1, 16 and 64
// QPs towards one peer, against one control QP per QP before.
func TestBackupSetMemory(t *testing.T) {
	caps := map[string]verbs.QPCap{
		"ib_send_bw (tx 128, rx 512)": {MaxSendWR: 128, MaxRecvWR: 512, MaxSendSGE: 1, MaxRecvSGE: 1},
		"tests (64/64, 2 SGEs)":       {MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64},
	}
	for _, nics := range []int{2, 3} {
		e := newEnvNICs(t, 1024, nil, false, nics)
		for name, cp := range caps {
			a, _ := e.pairs(t, 1, cp)
			q := a[0]
			def := q.Default().Rings()
			total := 0
			for i, bs := range q.sets {
				d := setMemory(bs)
				r, c, b := endpointMemory(bs.ep.Load())
				total += d
				t.Logf("%d backup(s), %s: set %d: backup QP rings %d B (default QP rings %d B); shared control endpoint: QP rings %d B, CQ %d B, buffer %d B: %d B",
					nics-1, name, i, d, pages(len(def.SQ)+len(def.RQ)), r, c, b, r+c+b)
			}
			t.Logf("%d backup(s), %s: all backup sets of the QP: %d B, plus the shared control endpoints", nics-1, name, total)
		}
	}
	e := newEnvNICs(t, 1024, nil, false, 2)
	cp := caps["tests (64/64, 2 SGEs)"]
	var qs []*QP
	for _, n := range []int{1, 16, 64} {
		a, _ := e.pairs(t, n-len(qs), cp)
		qs = append(qs, a...)
		eps := map[*ctlEndpoint]bool{}
		data, ctl := 0, 0
		for _, q := range qs {
			bs := q.sets[0]
			data += setMemory(bs)
			if ep := bs.ep.Load(); ep != nil && !eps[ep] {
				eps[ep] = true
				r, c, b := endpointMemory(ep)
				ctl += r + c + b
			}
		}
		if len(eps) != 1 {
			t.Errorf("%d QPs towards one peer context use %d control endpoints, want 1", len(qs), len(eps))
		}
		t.Logf("%d QPs (64/64) towards one peer, one backup: backup QP rings %d B; control: %d B shared (%d B per QP), was %d B (%d B per QP)",
			len(qs), data, ctl, ctl/len(qs), oldCtlPerQP*len(qs), oldCtlPerQP)
	}
}

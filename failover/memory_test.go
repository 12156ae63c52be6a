package failover

import (
	"testing"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// setMemory is the NIC-visible memory of one backup QP set: the rings of the backup data QP
// and of the control QP (SQ and RQ), each rounded up to pages as mapped, and the control
// receive buffer (its mapping).
func setMemory(bs *bkSet) (data, ctl, ctlBuf int) {
	rings := func(p *provider.QP) int {
		if p == nil {
			return 0
		}
		r := p.Rings()
		return pages(len(r.SQ) + len(r.RQ))
	}
	data, ctl = rings(bs.qp.Load()), rings(bs.ctl.Load())
	if bs.ctlBuf != nil {
		ctlBuf = cap(bs.ctlBuf.Bytes())
	}
	return data, ctl, ctlBuf
}

func pages(n int) int { return (n + 4095) / 4096 * 4096 }

// TestBackupSetMemory reports the memory of each backup QP set (the paper reports 138 KB per
// backup QP) for one and two backups, with perftest's ib_send_bw queue sizes and with the
// tests' small ones; every backup device adds one set per QP.
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
				d, c, b := setMemory(bs)
				total += d + c + b
				t.Logf("%d backup(s), %s: set %d: backup QP rings %d B, control QP rings %d B, control buffer %d B: %d B (default QP rings %d B)",
					nics-1, name, i, d, c, b, d+c+b, pages(len(def.SQ)+len(def.RQ)))
			}
			t.Logf("%d backup(s), %s: all backup sets of the QP: %d B", nics-1, name, total)
		}
	}
}

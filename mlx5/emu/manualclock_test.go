package emu_test

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/shift-rdma/shift/internal/clock"
	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/emutest"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// With the clock under the test's control, the link-down scenario is exact: after the last
// acknowledgement, each local ACK timeout (4.096 µs × 2^timeout) triggers one go-back-N
// retransmission from the first unacknowledged PSN, and the
// (retry_cnt+1)-th expiry completes the WRITE with RETRY_EXC_ERR.
func TestRetryExceededTimingManualClock(t *testing.T) {
	clk := clock.NewManual(time.Unix(1e9, 0))
	c := emutest.NewCluster(t, emu.ClusterConfig{Hosts: 2, Seed: 1, Clock: clk})
	conn := emutest.DefaultConn
	conn.Timeout, conn.RetryCnt = 14, 5
	p := emutest.NewPair(t, c, emutest.DefaultSize, conn)
	const size, passed = 1 << 20, 100
	ma := p.A.RegMR(size, emutest.AllAccess)
	mb := p.B.RegMR(size, emutest.AllAccess)
	fill(10, ma.Buf)

	var mu sync.Mutex
	var sent int           // data packets offered to the wire
	var firstPSNs []uint32 // PSN of the first data packet of each transmission burst
	var burstStart = true
	ep := c.Endpoint(0, 0, 1)
	ep.Faults(fabric.TX).SetFilter(func(pk *roce.Packet) bool {
		if !isData(pk) {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		sent++
		if burstStart {
			firstPSNs = append(firstPSNs, pk.BTH.PSN)
			burstStart = false
		}
		return sent > passed
	})
	p.QA.PostRing(t, emutest.WR{Op: mlx5.OpcodeRDMAWrite, Local: []mlx5.DataSeg{emutest.SGE(ma, ma.Buf)}, RemoteAddr: mb.Addr(), RKey: mb.RKey})

	// Real-time guard while the requester sends what its window allows and the first packets
	// are acknowledged; the manual clock does not move meanwhile, so once the packet count
	// stops growing the requester is waiting for its ACK timer.
	deadline := time.Now().Add(wait)
	last, stable := -1, 0
	for stable < 20 {
		mu.Lock()
		n := sent
		mu.Unlock()
		if n == last && n > passed && firstDiff(mb.Buf, ma.Buf) >= passed*1024 && clk.Pending() > 0 {
			stable++
		} else {
			stable = 0
		}
		last = n
		if time.Now().After(deadline) {
			t.Fatalf("first transmission incomplete: %d packets sent, %d bytes landed, %d timers", n, firstDiff(mb.Buf, ma.Buf), clk.Pending())
		}
		time.Sleep(time.Millisecond)
	}
	timeout := 4096 * time.Nanosecond << conn.Timeout
	var total time.Duration
	for i := 0; i <= int(conn.RetryCnt); i++ {
		if !p.SCQA.Empty() {
			t.Fatalf("completion after %d timeouts, want %d", i, conn.RetryCnt+1)
		}
		mu.Lock()
		burstStart = true
		mu.Unlock()
		d, ok := clk.AdvanceToNext()
		if !ok {
			t.Fatalf("no timer armed after %d timeouts", i)
		}
		total += d
	}
	wc := p.SCQA.Wait(t, wait)
	wantWC(t, "WRITE", wc, mlx5.WCRetryExcErr, 0, 0)
	if want := time.Duration(conn.RetryCnt+1) * timeout; total < want || total > want+timeout/8 {
		t.Errorf("RETRY_EXC_ERR after %v of emulated time, want (retry_cnt+1) × %v = %v", total, timeout, want)
	}
	mu.Lock()
	defer mu.Unlock()
	// The first transmission, then one go-back-N retransmission per expiry but the last.
	if len(firstPSNs) != int(conn.RetryCnt)+1 {
		t.Errorf("%d transmissions (%v), want 1 + %d retransmissions", len(firstPSNs), firstPSNs, conn.RetryCnt)
	}
	// Go-back-N restarts at the first PSN not yet acknowledged: after the start (the first
	// packets were acknowledged), no later than the first packet that was lost (ACKs may be
	// coalesced), and at the same PSN every time since nothing gets through any more.
	for i, psn := range firstPSNs[1:] {
		if psn <= conn.SQPSN || psn > conn.SQPSN+passed || psn != firstPSNs[1] {
			t.Errorf("retransmission %d starts at PSN %#x, want one PSN in (%#x, %#x]", i+1, psn, conn.SQPSN, conn.SQPSN+passed)
		}
	}
	if !bytes.Equal(mb.Buf[:passed*1024], ma.Buf[:passed*1024]) || firstDiff(mb.Buf, ma.Buf) != passed*1024 {
		t.Errorf("responder holds %d bytes, want exactly the %d packets that got through", firstDiff(mb.Buf, ma.Buf), passed)
	}
}

package provider_test

import (
	"runtime"
	"testing"

	"github.com/shift-rdma/shift/provider/verbs"
)

// BenchmarkEmulatedWrite64 posts a signaled 64-byte inline RDMA WRITE on a QP of the emulated
// ConnectX and polls its completion: provider and emulated NIC together, per operation. The
// allocations reported are the emulated NIC's (testing counts the whole process).
func BenchmarkEmulatedWrite64(b *testing.B) {
	tb := newTestbed(b)
	a, r := connectedPair(b, tb, defaultPairOpts())
	wr := []verbs.SendWR{{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled | verbs.SendInline,
		SGL: []verbs.SGE{a.mr.SGE(0, 64)}, RemoteAddr: r.mr.Addr(), RKey: r.mr.RKey()}}
	var wc [1]verbs.WC
	b.ReportAllocs()
	for b.Loop() {
		if err := a.qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		for {
			n, err := a.cq.Poll(wc[:])
			if err != nil || (n == 1 && wc[0].Status != verbs.WCSuccess) {
				b.Fatal(err, wc[0].Status)
			}
			if n == 1 {
				break
			}
			// The emulated NIC runs as goroutines of this process: yield to it.
			runtime.Gosched()
		}
	}
}

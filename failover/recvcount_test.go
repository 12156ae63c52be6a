package failover

import (
	"fmt"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestRecoveryWaitsForLateCQE: the receiver's backup NIC writes its receive CQEs late (held
// back by the emulator while the messages are placed and acknowledged), so the sender's
// recovery notification, on the default NIC, comes before the completions of the last
// messages it sent on the backup. The receiver's recovery must wait for them: taking its
// receive counter at once reposted their receives on the default QP, marked the backup's
// stale, and dropped the late completions as fillers' (a SEND lost, the next one in its
// buffer: TestNetnsRoCEv2Flapping/send failed so).
func TestRecoveryWaitsForLateCQE(t *testing.T) {
	e := newEnvCfg(t, 256, recoverOpts, true) // link events: the fallback starts while the sender is in a hook
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}
	a, b := e.pairs(t, 1, cp)
	qa, qb := a[0], b[0]
	late := e.cl.Hosts[1].Devices[1].NIC() // host B's backup NIC
	hb := e.hosts[1].ctx
	released := make(chan error, 1)
	hold := func() {
		waitFor(t, "the fallback", func() bool { return qa.SendState() == SendFallback && qb.RecvState() == RecvFallback },
			func() string { return e.describe(qa, qb) })
		late.HoldRecvCQEs(qb.cs().qp.Load().QPN()) // the SENDs from here on are received, their CQEs held
	}
	up := func() {
		e.linkUp(0)
		waitFor(t, "the probe", func() bool { return qa.SendState() != SendFallback }, func() string { return e.describe(qa, qb) })
		go func() {
			// Release once the receiver found its counter short of the sender's count, or
			// recovered without waiting.
			deadline := time.Now().Add(20 * time.Second)
			for qb.RecvState() != RecvDefault && hb.Stats().RecvLateWaits == 0 {
				if time.Now().After(deadline) {
					late.ReleaseRecvCQEs()
					released <- fmt.Errorf("the receiver neither waited nor recovered: %s", e.describe(qa, qb))
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
			late.ReleaseRecvCQEs()
			released <- nil
		}()
	}
	runStream(t, e, qa, qb, stream{mode: modeSend, msgs: 200, size: 1024, failAt: 40, failHost: 0, seed: 62,
		at: map[int]func(){60: hold, 80: up}})
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if st := hb.Stats(); st.RecvLateWaits == 0 || st.RecvLateTimeouts != 0 || st.RecvRecoveries == 0 {
		t.Fatalf("receiver: %d late waits, %d given up, %d receive recoveries; want a wait that ended", st.RecvLateWaits, st.RecvLateTimeouts, st.RecvRecoveries)
	}
	waitFor(t, "both QPs back on the default NIC", func() bool { return allDefault(qa, qb) }, func() string { return e.describe(qa, qb) })
	runStream(t, e, qa, qb, stream{mode: modeSend, msgs: 100, size: 1024, failAt: -1, seed: 63})
}

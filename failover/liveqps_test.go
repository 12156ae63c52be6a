package failover

import "testing"

// The live QPs come in QPN order, whatever the map's: a stepped context's re-arm and its
// failed control endpoints act on them in this order, and the simulation's runs with two
// backups replay only if it is the same every run.
func TestLiveQPsInQPNOrder(t *testing.T) {
	var r liveQPs
	for i := range 64 {
		r.add(&QP{qpn: uint32((i * 37) % 64)})
	}
	qs := r.all()
	if len(qs) != 64 {
		t.Fatalf("%d QPs, want 64", len(qs))
	}
	for i, q := range qs {
		if q.qpn != uint32(i) {
			t.Fatalf("QP %d of all() has QPN %d, want %d", i, q.qpn, i)
		}
	}
}

package failover

import (
	"testing"

	"github.com/shift-rdma/shift/mlx5/emu/fabric"
)

// TestTransportErrorNoStopCommand: a fallback started by a transport error completion of the
// default QP (everything it sends is lost, with its link up: RETRY_EXC_ERR, no port event)
// issues no command to move that QP to ERR, which the NIC did as it wrote the completion, and
// still delivers every WRITE once and in order (runStreamTB checks the data); the peer,
// whose default QP had no error, has its moved by the command.
func TestTransportErrorNoStopCommand(t *testing.T) {
	e := newEnv(t, 256)
	a, b := e.pairs(t, 1, smallCap)
	lose := func() { e.cl.Endpoint(0, 0, 1).Faults(fabric.TX).SetBlackhole(true) }
	runStreamTB(t, e, a[0], b[0], stream{mode: modeWrite, msgs: 64, size: 4096, failAt: -1, seed: 3, at: map[int]func(){32: lose}})
	if a[0].FallbackLatency() <= 0 {
		t.Fatalf("no fallback from an error completion: %s", e.describe(a[0], b[0]))
	}
	if cmd := a[0].tCmd.Load(); cmd != 0 {
		t.Errorf("the failed QP's round spent %d ns in the ERR command", cmd)
	}
	if b[0].tCmd.Load() == 0 {
		t.Error("the peer's round issued no ERR command: its default QP was live")
	}
}

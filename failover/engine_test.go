package failover

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/shift-rdma/shift/provider/verbs"
)

// TestTransitionsOffApplicationThreads: with failures on either host, for each kind of
// stream, no fallback round runs inside the application's Poll or PostSend: the data path
// queues what it found and the context's engine (or SHIFT's own event goroutines) runs it.
func TestTransitionsOffApplicationThreads(t *testing.T) {
	var mu sync.Mutex
	var rounds, onEngine int
	var onApp []string
	hook := func() {
		buf := make([]byte, 64<<10)
		st := string(buf[:runtime.Stack(buf, false)])
		mu.Lock()
		defer mu.Unlock()
		rounds++
		if strings.Contains(st, "failover.(*engine).run(") {
			onEngine++
		}
		for _, f := range []string{"failover.(*CQ).Poll(", "failover.(*QP).PostSend(", "failover.(*QP).PostRecv("} {
			if strings.Contains(st, f) {
				onApp = append(onApp, st)
			}
		}
	}
	testHookRound.Store(&hook)
	t.Cleanup(func() { testHookRound.Store(nil) })
	cp := verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}
	for _, mode := range []streamMode{modeWrite, modeSend} {
		for _, side := range []int{0, 1} {
			t.Run(fmt.Sprintf("%v/fail-host%d", mode, side), func(t *testing.T) {
				e := newEnv(t, 256)
				a, b := e.pairs(t, 1, cp)
				runStream(t, e, a[0], b[0], stream{mode: mode, msgs: 120, size: 2048, failAt: 60, failHost: side, seed: uint64(7 + side)})
			})
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if rounds == 0 {
		t.Fatal("no fallback round ran: the test observed nothing")
	}
	if len(onApp) > 0 {
		t.Fatalf("%d of %d fallback rounds ran on an application thread; the first:\n%s", len(onApp), rounds, onApp[0])
	}
	t.Logf("%d fallback rounds, none on an application thread, %d on the engine goroutine", rounds, onEngine)
}

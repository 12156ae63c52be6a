package demo

import (
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shift-rdma/shift/provider/verbs"
)

// runStreams runs a stream's sender and receiver over a fake pair until the receiver has
// verified target messages or an error is recorded (guard: 30 s).
func runStreams(t *testing.T, st *streamStats, target uint64, sender, receiver func(context.Context)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { sender(ctx) })
	wg.Go(func() { receiver(ctx) })
	deadline := time.Now().Add(30 * time.Second)
	for st.msgs.Load() < target && len(st.errors()) == 0 {
		if time.Now().After(deadline) {
			cancel()
			wg.Wait()
			t.Fatalf("guard timeout: %d of %d messages verified", st.msgs.Load(), target)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
}

func newWriteFake(tamper func(*verbs.SendWR, []byte) (bool, bool)) *writeStream {
	w := &writeStream{slots: 4, chunk: 256, parts: 3, st: &streamStats{name: "WRITE", start: time.Now()}}
	w.snd, w.rcv = newFakePair(w.slots*w.slotSize(), tamper)
	return w
}

func newSendFake(tamper func(*verbs.SendWR, []byte) (bool, bool)) *sendStream {
	s := &sendStream{slots: 4, size: 512, st: &streamStats{name: "SEND", start: time.Now()}}
	s.snd, s.rcv = newFakePair(s.slots*s.size, tamper)
	return s
}

func TestStreamsVerifyCleanTraffic(t *testing.T) {
	w := newWriteFake(nil)
	runStreams(t, w.st, 300, w.sender, w.receiver)
	s := newSendFake(nil)
	runStreams(t, s.st, 300, s.sender, s.receiver)
	for _, r := range []StreamResult{w.st.result(), s.st.result()} {
		if len(r.Errors) != 0 || r.MsgsVerified < 300 {
			t.Fatalf("%s: %d messages, errors %v", r.Name, r.MsgsVerified, r.Errors)
		}
	}
	if got, want := w.st.bytes.Load(), w.st.msgs.Load()*uint64(w.slotSize()); got != want {
		t.Fatalf("WRITE bytes %d, want %d", got, want)
	}
	if got, want := s.st.bytes.Load(), s.st.msgs.Load()*uint64(s.size); got != want {
		t.Fatalf("SEND bytes %d, want %d", got, want)
	}
}

// The verifiers must catch every fault the failover could cause: a WRITE whose data is
// wrong or missing when its flag arrives, a lost or repeated flag, a duplicated, lost or
// corrupted SEND.
func TestStreamsCatchFaults(t *testing.T) {
	const at = 37 // the message that goes wrong
	nthOf := func(op verbs.WROpcode, n int) func(*verbs.SendWR) bool {
		seen := 0
		return func(wr *verbs.SendWR) bool {
			if wr.Opcode != op {
				return false
			}
			seen++
			return seen == n
		}
	}
	cases := []struct {
		name   string
		write  bool
		match  func(*verbs.SendWR) bool
		act    func(data []byte) (drop, dup bool)
		expect string
	}{
		{"write data corrupted", true, nthOf(verbs.WRRDMAWrite, 3*at+2),
			func(d []byte) (bool, bool) { d[100] ^= 1; return false, false }, "data wrong"},
		{"write chunk lost", true, nthOf(verbs.WRRDMAWrite, 3*at+1),
			func([]byte) (bool, bool) { return true, false }, "data wrong"},
		{"flag lost", true, nthOf(verbs.WRRDMAWriteWithImm, at),
			func([]byte) (bool, bool) { return true, false }, "lost or duplicated flag"},
		{"flag repeated", true, nthOf(verbs.WRRDMAWriteWithImm, at),
			func([]byte) (bool, bool) { return false, true }, "lost or duplicated flag"},
		{"send duplicated", false, nthOf(verbs.WRSend, at),
			func([]byte) (bool, bool) { return false, true }, "not exactly once"},
		{"send lost", false, nthOf(verbs.WRSend, at),
			func([]byte) (bool, bool) { return true, false }, "not exactly once"},
		{"send corrupted", false, nthOf(verbs.WRSend, at),
			func(d []byte) (bool, bool) { binary.LittleEndian.PutUint64(d[64:], 0); return false, false }, "data wrong"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tamper := func(wr *verbs.SendWR, data []byte) (bool, bool) {
				if !c.match(wr) {
					return false, false
				}
				return c.act(data)
			}
			var st *streamStats
			if c.write {
				w := newWriteFake(tamper)
				st = w.st
				runStreams(t, st, 1000, w.sender, w.receiver)
			} else {
				s := newSendFake(tamper)
				st = s.st
				runStreams(t, st, 1000, s.sender, s.receiver)
			}
			errs := st.errors()
			if len(errs) == 0 {
				t.Fatalf("fault not seen; %d messages verified", st.msgs.Load())
			}
			if !strings.Contains(errs[0].What, c.expect) || errs[0].Side != "receiver" {
				t.Fatalf("first error %q, want a receiver error containing %q", errs[0], c.expect)
			}
			if st.msgs.Load() > at {
				t.Fatalf("%d messages verified past the fault at %d", st.msgs.Load(), at)
			}
		})
	}
}

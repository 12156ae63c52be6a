package rc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

func wantSends(t *testing.T, got []SendCompletion, want ...SendCompletion) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("send completions %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("send completion %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestWriteSegmentationAndPSNs(t *testing.T) {
	e := newEnv(t, nil)
	rec := &recorder{}
	e.pair.A.SetDrop(rec.hook)
	mem := e.hb.register(0x77, 0x10000, 20000, AccessRemoteWrite)
	src := pattern(10000, 3)
	// Two gather entries, split inside a packet.
	e.post(e.a, WorkRequest{Index: 1, Op: OpWrite, Local: [][]byte{src[:1500], src[1500:]},
		RemoteAddr: 0x10000 + 100, RKey: 0x77, Signaled: true})
	e.settle()
	wantSends(t, e.ha.sendC(), SendCompletion{Index: 1, Op: OpWrite, Status: StatusSuccess, ByteLen: 10000, Signaled: true})
	if !bytes.Equal(mem[100:10100], src) || mem[99] != 0 || mem[10100] != 0 {
		t.Fatal("written bytes differ from the source or spill outside the target range")
	}
	pk := rec.packets()
	if len(pk) != 10 {
		t.Fatalf("%d packets for 10000 bytes at MTU 1024, want 10", len(pk))
	}
	for i, p := range pk {
		want := roce.WriteMiddle
		switch i {
		case 0:
			want = roce.WriteFirst
		case 9:
			want = roce.WriteLast
		}
		if p.BTH.Opcode != want || p.BTH.PSN != uint32(100+i) || p.BTH.DestQP != 0x22 {
			t.Fatalf("packet %d: opcode %#x psn %d qp %#x; want %#x psn %d qp 0x22", i, p.BTH.Opcode, p.BTH.PSN, p.BTH.DestQP, want, 100+i)
		}
		if p.BTH.AckReq != (i == 9) {
			t.Fatalf("packet %d AckReq=%v", i, p.BTH.AckReq)
		}
		if p.Has != want.Headers() {
			t.Fatalf("packet %d headers %#x, want %#x", i, p.Has, want.Headers())
		}
	}
	if r := pk[0].RETH; r.VA != 0x10064 || r.RKey != 0x77 || r.DMALen != 10000 {
		t.Fatalf("RETH %+v", r)
	}
	// WRITE with immediate: LAST carries it and consumes a receive.
	rx := e.hb.postRecv()
	e.post(e.a, WorkRequest{Index: 2, Op: OpWriteImm, Local: [][]byte{src[:2048]}, RemoteAddr: 0x10000, RKey: 0x77, Imm: 0xdeadbeef})
	e.settle()
	pk = rec.packets()[10:]
	if len(pk) != 2 || pk[0].BTH.Opcode != roce.WriteFirst || pk[1].BTH.Opcode != roce.WriteLastWithImmediate || pk[1].Imm != 0xdeadbeef || pk[0].BTH.PSN != 110 {
		t.Fatalf("WRITE_IMM packets %+v", pk)
	}
	rc := e.hb.recvC()
	if len(rc) != 1 || rc[0] != (RecvCompletion{Index: rx, Op: OpWriteImm, ByteLen: 2048, Imm: 0xdeadbeef, HasImm: true, SrcQPN: 0x11}) {
		t.Fatalf("receive completions %+v", rc)
	}
	// Single-packet WRITE_IMM uses WRITE_ONLY_WITH_IMMEDIATE.
	e.hb.postRecv()
	e.post(e.a, WorkRequest{Index: 3, Op: OpWriteImm, Local: [][]byte{src[:8]}, RemoteAddr: 0x10000, RKey: 0x77, Imm: 5})
	e.settle()
	if p := rec.packets()[12]; p.BTH.Opcode != roce.WriteOnlyWithImmediate || p.RETH.DMALen != 8 || p.Imm != 5 {
		t.Fatalf("WRITE_ONLY_IMM packet %+v", p)
	}
	if s := e.ha.sendC(); len(s) != 3 || s[2].Status != StatusSuccess {
		t.Fatalf("completions %+v", s)
	}
	if st := e.b.Stats(); st.Duplicates != 0 || st.SeqNAKsSent != 0 {
		t.Fatalf("lossless run produced duplicates or NAKs: %+v", st)
	}
}

func TestPSNWrap(t *testing.T) {
	e := newEnv(t, func(a, b *Config) { a.SQPSN, b.RQPSN = 0xfffffd, 0xfffffd })
	rec := &recorder{}
	e.pair.A.SetDrop(rec.hook)
	mem := e.hb.register(1, 0, 8192, AccessRemoteWrite)
	src := pattern(5000, 9)
	e.post(e.a, WorkRequest{Index: 0, Op: OpWrite, Local: [][]byte{src}, RKey: 1})
	e.post(e.a, WorkRequest{Index: 1, Op: OpWrite, Local: [][]byte{src[:10]}, RKey: 1, RemoteAddr: 6000})
	e.settle()
	want := []uint32{0xfffffd, 0xfffffe, 0xffffff, 0, 1, 2}
	for i, p := range rec.packets() {
		if p.BTH.PSN != want[i] {
			t.Fatalf("packet %d PSN %#x, want %#x", i, p.BTH.PSN, want[i])
		}
	}
	if s := e.ha.sendC(); len(s) != 2 || s[0].Status != 0 || s[1].Status != 0 {
		t.Fatalf("completions across the PSN wrap: %+v", s)
	}
	if !bytes.Equal(mem[:5000], src) || !bytes.Equal(mem[6000:6010], src[:10]) {
		t.Fatal("data mismatch across the PSN wrap")
	}
}

func TestSendRecv(t *testing.T) {
	e := newEnv(t, nil)
	rec := &recorder{}
	e.pair.A.SetDrop(rec.hook)
	src := pattern(3000, 1)
	d1, d2 := make([]byte, 1000), make([]byte, 4000)
	rx := e.hb.postRecv(d1, d2)
	e.post(e.a, WorkRequest{Index: 7, Op: OpSendImm, Local: [][]byte{src}, Imm: 42, Solicited: true, Signaled: true})
	e.settle()
	rc := e.hb.recvC()
	if len(rc) != 1 || rc[0] != (RecvCompletion{Index: rx, Op: OpSendImm, ByteLen: 3000, Imm: 42, HasImm: true, SrcQPN: 0x11, Solicited: true}) {
		t.Fatalf("receive completion %+v", rc)
	}
	if !bytes.Equal(d1, src[:1000]) || !bytes.Equal(d2[:2000], src[1000:]) {
		t.Fatal("SEND payload not scattered in order")
	}
	pk := rec.packets()
	if len(pk) != 3 || pk[0].BTH.Opcode != roce.SendFirst || pk[1].BTH.Opcode != roce.SendMiddle ||
		pk[2].BTH.Opcode != roce.SendLastWithImmediate || !pk[2].BTH.SE || pk[0].BTH.SE {
		t.Fatalf("SEND packets %+v", pk)
	}
	wantSends(t, e.ha.sendC(), SendCompletion{Index: 7, Op: OpSendImm, ByteLen: 3000, Signaled: true})
	// A zero-length SEND is one SEND_ONLY packet and still consumes a receive.
	rx = e.hb.postRecv(d1)
	e.post(e.a, WorkRequest{Index: 8, Op: OpSend})
	e.settle()
	rc = e.hb.recvC()
	if len(rc) != 2 || rc[1] != (RecvCompletion{Index: rx, Op: OpSend, SrcQPN: 0x11}) {
		t.Fatalf("zero-length receive completion %+v", rc)
	}
	if p := rec.packets()[3]; p.BTH.Opcode != roce.SendOnly || len(rec.packets()) != 4 {
		t.Fatalf("zero-length SEND packet %+v", p)
	}
}

func TestReadAndAtomics(t *testing.T) {
	e := newEnv(t, nil)
	rec := &recorder{}
	e.pair.A.SetDrop(rec.hook)
	mem := e.hb.register(9, 0x5000, 8192, AccessRemoteRead|AccessRemoteAtomic)
	copy(mem, pattern(8192, 5))
	s1, s2 := make([]byte, 2000), make([]byte, 3000)
	e.post(e.a, WorkRequest{Index: 0, Op: OpRead, Local: [][]byte{s1, s2}, RemoteAddr: 0x5000 + 16, RKey: 9})
	binary.NativeEndian.PutUint64(mem[6000:], 40)
	res1, res2 := make([]byte, 8), make([]byte, 8)
	e.post(e.a, WorkRequest{Index: 1, Op: OpFetchAdd, Local: [][]byte{res1}, RemoteAddr: 0x5000 + 6000, RKey: 9, SwapAdd: 2})
	e.post(e.a, WorkRequest{Index: 2, Op: OpCompareSwap, Local: [][]byte{res2}, RemoteAddr: 0x5000 + 6000, RKey: 9, Compare: 42, SwapAdd: 7})
	e.post(e.a, WorkRequest{Index: 3, Op: OpCompareSwap, Local: [][]byte{res2[:4], res2[4:]}, RemoteAddr: 0x5000 + 6000, RKey: 9, Compare: 42, SwapAdd: 9})
	e.settle()
	wantSends(t, e.ha.sendC(),
		SendCompletion{Index: 0, Op: OpRead, ByteLen: 5000},
		SendCompletion{Index: 1, Op: OpFetchAdd, ByteLen: 8},
		SendCompletion{Index: 2, Op: OpCompareSwap, ByteLen: 8},
		SendCompletion{Index: 3, Op: OpCompareSwap, ByteLen: 8})
	if !bytes.Equal(append(s1, s2...), mem[16:5016]) {
		t.Fatal("READ data differs from remote memory")
	}
	if binary.NativeEndian.Uint64(res1) != 40 || binary.NativeEndian.Uint64(res2) != 7 {
		t.Fatalf("atomic results %d %d, want 40 7", binary.NativeEndian.Uint64(res1), binary.NativeEndian.Uint64(res2))
	}
	if v := binary.NativeEndian.Uint64(mem[6000:]); v != 7 {
		t.Fatalf("remote value %d after FADD 2 (40→42), CAS 42→7, CAS 42→9 (fails): want 7", v)
	}
	// The READ request is one packet but consumes 5 PSNs: the FADD is PSN 105.
	pk := rec.packets()
	if len(pk) != 4 || pk[0].BTH.Opcode != roce.ReadRequest || pk[0].RETH.DMALen != 5000 ||
		pk[1].BTH.Opcode != roce.FetchAdd || pk[1].BTH.PSN != 105 || pk[2].BTH.PSN != 106 {
		t.Fatalf("request packets %+v", pk)
	}
}

func TestRemoteAccessErrors(t *testing.T) {
	cases := []struct {
		name string
		wr   WorkRequest
	}{
		{"bad rkey", WorkRequest{Op: OpWrite, RKey: 0x99, RemoteAddr: 0x1000}},
		{"beyond region", WorkRequest{Op: OpWrite, RKey: 1, RemoteAddr: 0x1000 + 4000}},
		{"read of write-only region", WorkRequest{Op: OpRead, RKey: 1, RemoteAddr: 0x1000}},
		{"atomic without right", WorkRequest{Op: OpFetchAdd, RKey: 1, RemoteAddr: 0x1000}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.hb.register(1, 0x1000, 4096, AccessRemoteWrite)
			wr := c.wr
			if wr.Op.isAtomic() {
				wr.Local = [][]byte{make([]byte, 8)}
			} else {
				wr.Local = [][]byte{make([]byte, 200)}
			}
			wr.Index = 10
			e.post(e.a, wr)
			e.post(e.a, WorkRequest{Index: 11, Op: OpWrite, RKey: 1, RemoteAddr: 0x1000, Local: [][]byte{make([]byte, 8)}})
			e.settle()
			wantSends(t, e.ha.sendC(),
				SendCompletion{Index: 10, Op: wr.Op, Status: StatusRemAccessErr},
				SendCompletion{Index: 11, Op: OpWrite, Status: StatusWRFlushErr})
			if e.a.State() != StateError || e.b.State() != StateError {
				t.Fatalf("states %v/%v, want ERR/ERR", e.a.State(), e.b.State())
			}
			if ea, eb := e.ha.errs(), e.hb.errs(); len(ea) != 1 || ea[0] != StatusRemAccessErr || len(eb) != 1 || eb[0] != StatusLocAccessErr {
				t.Fatalf("QP errors %v / %v", ea, eb)
			}
		})
	}
}

func TestQPAccessFlagsAndLengthErrors(t *testing.T) {
	t.Run("write to QP without remote write", func(t *testing.T) {
		e := newEnv(t, func(a, b *Config) { b.RemoteAccess = AccessRemoteRead })
		e.hb.register(1, 0, 64, AccessRemoteWrite)
		e.post(e.a, WorkRequest{Op: OpWrite, RKey: 1, Local: [][]byte{make([]byte, 8)}})
		e.settle()
		wantSends(t, e.ha.sendC(), SendCompletion{Op: OpWrite, Status: StatusRemInvReqErr})
	})
	t.Run("receive too small", func(t *testing.T) {
		e := newEnv(t, nil)
		rx := e.hb.postRecv(make([]byte, 100))
		e.hb.postRecv(make([]byte, 100))
		e.post(e.a, WorkRequest{Index: 4, Op: OpSend, Local: [][]byte{make([]byte, 101)}})
		e.settle()
		wantSends(t, e.ha.sendC(), SendCompletion{Index: 4, Op: OpSend, Status: StatusRemInvReqErr})
		rc := e.hb.recvC()
		if len(rc) != 1 || rc[0].Index != rx || rc[0].Status != StatusLocLenErr {
			t.Fatalf("receive completions %+v", rc)
		}
		if e.b.State() != StateError || e.hb.errs()[0] != StatusLocLenErr {
			t.Fatalf("responder state %v errs %v", e.b.State(), e.hb.errs())
		}
		// The NIC flushes the remaining receive.
		e.b.FlushRecv()
		rc = e.hb.recvC()
		if len(rc) != 2 || rc[1].Status != StatusWRFlushErr || rc[1].Index != rx+1 {
			t.Fatalf("flushed receive %+v", rc)
		}
	})
	t.Run("misaligned atomic", func(t *testing.T) {
		e := newEnv(t, nil)
		e.hb.register(1, 0, 64, AccessRemoteAtomic)
		e.post(e.a, WorkRequest{Op: OpFetchAdd, RKey: 1, RemoteAddr: 4, Local: [][]byte{make([]byte, 8)}})
		e.settle()
		wantSends(t, e.ha.sendC(), SendCompletion{Op: OpFetchAdd, Status: StatusRemInvReqErr})
	})
}

func TestModifyAndPostRules(t *testing.T) {
	e := newEnv(t, nil)
	q := New(newTestHost())
	defer q.Close()
	if err := q.Post(&WorkRequest{Op: OpSend}); !errors.Is(err, ErrState) {
		t.Fatalf("post in RESET: %v, want ErrState", err)
	}
	if err := q.Modify(StateRTS, e.ca); !errors.Is(err, ErrState) {
		t.Fatalf("RESET→RTS: %v, want ErrState", err)
	}
	if err := q.Modify(StateInit, e.ca); err != nil {
		t.Fatal(err)
	}
	bad := e.ca
	bad.PathMTU = 1000
	if err := q.Modify(StateRTR, bad); !errors.Is(err, ErrConfig) {
		t.Fatalf("RTR with MTU 1000: %v, want ErrConfig", err)
	}
	if err := q.Modify(StateRTR, e.ca); err != nil {
		t.Fatal(err)
	}
	if err := q.Post(&WorkRequest{Op: OpSend}); !errors.Is(err, ErrState) {
		t.Fatalf("post in RTR: %v, want ErrState", err)
	}
	bad = e.ca
	bad.RetryCnt = 8
	if err := q.Modify(StateRTS, bad); !errors.Is(err, ErrConfig) {
		t.Fatalf("RTS with retry_cnt 8: %v, want ErrConfig", err)
	}
	if err := q.Modify(StateRTS, e.ca); err != nil {
		t.Fatal(err)
	}
	if err := q.Post(&WorkRequest{Op: OpFetchAdd, Local: [][]byte{make([]byte, 4)}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("atomic with a 4-byte result: %v, want ErrConfig", err)
	}
	if err := q.Post(&WorkRequest{Op: Op(99)}); !errors.Is(err, ErrConfig) {
		t.Fatalf("unknown op: %v, want ErrConfig", err)
	}
	if err := q.Modify(StateInit, e.ca); !errors.Is(err, ErrState) {
		t.Fatalf("RTS→INIT: %v, want ErrState", err)
	}
	if q.State() != StateRTS || q.State().String() != "RTS" {
		t.Fatalf("state %v", q.State())
	}
	q.Close()
	if err := q.Post(&WorkRequest{Op: OpSend}); !errors.Is(err, ErrClosed) {
		t.Fatalf("post after Close: %v", err)
	}
}

func TestFlushOnModifyToError(t *testing.T) {
	e := newEnv(t, nil)
	e.pair.A.SetDown(true)
	e.hb.register(1, 0, 1<<16, AccessRemoteWrite)
	for i := range 3 {
		e.post(e.a, WorkRequest{Index: uint16(i), Op: OpWrite, RKey: 1, Local: [][]byte{make([]byte, 3000)}})
	}
	e.settle()
	if len(e.ha.sendC()) != 0 {
		t.Fatal("completions while the link is down")
	}
	if err := e.a.Modify(StateError, Config{}); err != nil {
		t.Fatal(err)
	}
	e.post(e.a, WorkRequest{Index: 3, Op: OpSend})
	s := e.ha.sendC()
	if len(s) != 4 {
		t.Fatalf("completions %+v", s)
	}
	for i, c := range s {
		if c.Index != uint16(i) || c.Status != StatusWRFlushErr {
			t.Fatalf("completion %d = %+v, want flush of index %d", i, c, i)
		}
	}
	if len(e.ha.errs()) != 0 {
		t.Fatal("QPError reported for a modify the NIC asked for")
	}
	if e.clk.Pending() != 0 {
		// Stopped timers leave the manual clock's queue.
		t.Fatalf("%d timers pending after ERR", e.clk.Pending())
	}
	// Reset and reconnect: the QP works again.
	if err := e.a.Modify(StateReset, Config{}); err != nil {
		t.Fatal(err)
	}
	e.pair.A.SetDown(false)
	ca := e.ca
	ca.SQPSN = 7000
	cb := e.cb
	cb.RQPSN = 7000
	if err := e.b.Modify(StateReset, Config{}); err != nil {
		t.Fatal(err)
	}
	connect(t, e.a, ca)
	connect(t, e.b, cb)
	e.post(e.a, WorkRequest{Index: 9, Op: OpWrite, RKey: 1, Local: [][]byte{make([]byte, 3000)}})
	e.settle()
	if s := e.ha.sendC(); len(s) != 5 || s[4].Status != StatusSuccess {
		t.Fatalf("after reset: %+v", s)
	}
}

package demo

import (
	"sync"

	"github.com/shift-rdma/shift/provider/verbs"
)

// fakeLink joins two fakeSides with an instantaneous, in-order, lossless RC "wire" in Go
// memory, so the verifiers can be tested against precise faults (tamper) without a NIC.
type fakeLink struct {
	mu sync.Mutex
	// tamper sees every send WR before it executes, with the bytes it carries (its SGL
	// gathered); it may change data and asks to drop or duplicate the WR.
	tamper func(wr *verbs.SendWR, data []byte) (drop, dup bool)
}

type fakeSide struct {
	link  *fakeLink
	peer  *fakeSide
	base  uint64
	buf   []byte
	recvs []verbs.RecvWR
	cq    []verbs.WC
	// backlog holds arrivals that found no receive posted; they complete, in order, as
	// receives are posted, as RNR retries would deliver them.
	backlog []func(verbs.RecvWR)
}

func newFakePair(size int, tamper func(*verbs.SendWR, []byte) (bool, bool)) (*fakeSide, *fakeSide) {
	l := &fakeLink{tamper: tamper}
	a := &fakeSide{link: l, base: 0x10000000, buf: make([]byte, size)}
	b := &fakeSide{link: l, base: 0x70000000, buf: make([]byte, size)}
	a.peer, b.peer = b, a
	return a, b
}

func (f *fakeSide) mem(addr uint64, n uint32) []byte {
	o := addr - f.base
	return f.buf[o : o+uint64(n)]
}

func (f *fakeSide) PostSend(wrs []verbs.SendWR) error {
	f.link.mu.Lock()
	defer f.link.mu.Unlock()
	for i := range wrs {
		wr := wrs[i]
		var data []byte
		for _, s := range wr.SGL {
			data = append(data, f.mem(s.Addr, s.Length)...)
		}
		drop, dup := false, false
		if f.link.tamper != nil {
			drop, dup = f.link.tamper(&wr, data)
		}
		for range 1 + b2i(dup) - b2i(drop) {
			if err := f.exec(&wr, data); err != nil {
				return err
			}
		}
		if wr.Flags&verbs.SendSignaled != 0 {
			f.cq = append(f.cq, verbs.WC{WRID: wr.WRID, Status: verbs.WCSuccess})
		}
	}
	return nil
}

func (f *fakeSide) exec(wr *verbs.SendWR, data []byte) error {
	p := f.peer
	switch wr.Opcode {
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
		copy(p.mem(wr.RemoteAddr, uint32(len(data))), data)
		if wr.Opcode == verbs.WRRDMAWrite {
			return nil
		}
		imm, n := wr.Imm, uint32(len(data))
		p.arrive(func(r verbs.RecvWR) {
			p.cq = append(p.cq, verbs.WC{WRID: r.WRID, Opcode: verbs.WCRecvRDMAWithImm, Imm: imm,
				Flags: verbs.WCFlagWithImm, ByteLen: n})
		})
	case verbs.WRSend:
		data = append([]byte(nil), data...)
		p.arrive(func(r verbs.RecvWR) {
			copy(p.mem(r.SGL[0].Addr, r.SGL[0].Length), data)
			p.cq = append(p.cq, verbs.WC{WRID: r.WRID, Opcode: verbs.WCRecv, ByteLen: uint32(len(data))})
		})
	}
	return nil
}

func (f *fakeSide) PostRecv(wrs []verbs.RecvWR) error {
	f.link.mu.Lock()
	defer f.link.mu.Unlock()
	for _, w := range wrs {
		w.SGL = append([]verbs.SGE(nil), w.SGL...)
		f.recvs = append(f.recvs, w)
	}
	for len(f.backlog) > 0 && len(f.recvs) > 0 {
		fn := f.backlog[0]
		f.backlog = f.backlog[1:]
		f.consume(fn)
	}
	return nil
}

// arrive delivers a receive-consuming arrival now, or after the next PostRecv.
func (f *fakeSide) arrive(fn func(verbs.RecvWR)) {
	if len(f.recvs) == 0 || len(f.backlog) > 0 {
		f.backlog = append(f.backlog, fn)
		return
	}
	f.consume(fn)
}

func (f *fakeSide) consume(fn func(verbs.RecvWR)) {
	r := f.recvs[0]
	f.recvs = f.recvs[1:]
	fn(r)
}

func (f *fakeSide) Poll(wcs []verbs.WC) (int, error) {
	f.link.mu.Lock()
	defer f.link.mu.Unlock()
	n := copy(wcs, f.cq)
	f.cq = f.cq[n:]
	return n, nil
}

func (f *fakeSide) Buf() []byte                         { return f.buf }
func (f *fakeSide) LKey() uint32                        { return 1 }
func (f *fakeSide) RKey() uint32                        { return 2 }
func (f *fakeSide) Addr() uint64                        { return f.base }
func (f *fakeSide) Endpoint() verbs.Endpoint            { return verbs.Endpoint{} }
func (f *fakeSide) Connect(remote verbs.Endpoint) error { return nil }
func (f *fakeSide) Close() error                        { return nil }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

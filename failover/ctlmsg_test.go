package failover

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestCtlMsgRoundTrip: every field of a control message survives put and parse, the
// incarnation modulo 2^24.
func TestCtlMsgRoundTrip(t *testing.T) {
	for _, m := range []ctlMsg{
		{dst: 1, src: 1},
		{count: 0xabcdef, stale: 512, gen: 7, dst: 0x12, src: 0x34},
		{refused: true, reply: true, gen: countMask, dst: psnMask, src: psnMask},
		{count: 1, reply: true, gen: 0x123456, dst: 0x800, src: 0x801},
		{count: 2, pinned: true, gen: 3, dst: 5, src: 6},
	} {
		var b [ctlMsgSize]byte
		m.put(b[:])
		got, err := parseCtlMsg(b[:])
		if err != nil || got != m {
			t.Fatalf("put %+v, parsed %+v (%v)", m, got, err)
		}
	}
}

// TestCtlMsgRefused: messages of version 1 (16 bytes, no QPNs), of another version or
// length, with reserved flags, a QPN out of range or no magic are no messages.
func TestCtlMsgRefused(t *testing.T) {
	good := func() []byte {
		b := make([]byte, ctlMsgSize)
		ctlMsg{count: 3, gen: 4, dst: 0x10, src: 0x20}.put(b)
		return b
	}
	for name, mut := range map[string]func([]byte) []byte{
		"version 1 (16 bytes)":   func(b []byte) []byte { return b[:16] },
		"longer":                 func(b []byte) []byte { return append(b, 0) },
		"version 2 (stale left)": func(b []byte) []byte { b[16] = 2; return b },
		"version 4":              func(b []byte) []byte { b[16] = 4; return b },
		"version 0":              func(b []byte) []byte { b[16] = 0; return b },
		"no magic":               func(b []byte) []byte { b[12] ^= 1; return b },
		"reserved flag":          func(b []byte) []byte { b[11] |= 0x20; return b },
		"to QPN 0":               func(b []byte) []byte { binary.BigEndian.PutUint32(b[16:], ctlVersion<<24); return b },
		"from QPN 0":             func(b []byte) []byte { binary.BigEndian.PutUint32(b[20:], 0); return b },
		"from QPN 25 bits":       func(b []byte) []byte { binary.BigEndian.PutUint32(b[20:], 1<<24|1); return b },
	} {
		if m, err := parseCtlMsg(mut(good())); err == nil {
			t.Errorf("%s: parsed %+v", name, m)
		}
	}
}

// FuzzCtlMsg: any bytes either parse into a message that names two QPNs in range and
// encodes back to the same bytes, or are refused; nothing panics.
func FuzzCtlMsg(f *testing.F) {
	b := make([]byte, ctlMsgSize)
	ctlMsg{count: 3, reply: true, gen: 4, dst: 0x10, src: 0x20}.put(b)
	f.Add(b)
	f.Add(b[:16])
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseCtlMsg(b)
		if err != nil {
			return
		}
		out := make([]byte, ctlMsgSize)
		m.put(out)
		if !validQPN(m.dst) || !validQPN(m.src) || !bytes.Equal(out, b) {
			t.Fatalf("accepted %+v from %x (encodes to %x)", m, b, out)
		}
	})
}

// TestGenAfter: the receiver of a message takes the sender's incarnation only when it is
// ahead (24-bit serial arithmetic, across the wrap).
func TestGenAfter(t *testing.T) {
	for _, c := range []struct {
		own  uint64
		gen  uint32
		want uint64
	}{
		{own: 5, gen: 5, want: 5},
		{own: 5, gen: 7, want: 7},
		{own: 7, gen: 5, want: 7},
		{own: 1<<24 - 1, gen: 1, want: 1<<24 + 1},
		{own: 1<<24 + 1, gen: 1<<24 - 1, want: 1<<24 + 1},
		{own: 3 << 24, gen: 2, want: 3<<24 + 2},
	} {
		if got := genAfter(c.own, c.gen); got != c.want {
			t.Errorf("genAfter(%#x, %#x) = %#x, want %#x", c.own, c.gen, got, c.want)
		}
	}
}

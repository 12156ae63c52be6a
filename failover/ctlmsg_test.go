package failover

import "testing"

// TestCtlMsgRoundTrip: every field of a control message survives put and parse, the
// incarnation modulo 2^24.
func TestCtlMsgRoundTrip(t *testing.T) {
	for _, m := range []ctlMsg{
		{},
		{count: 0xabcdef, stale: 512, gen: 7},
		{refused: true, reply: true, gen: countMask},
		{count: 1, reply: true, gen: 0x123456},
		{count: 2, pinned: true, gen: 3},
	} {
		var b [ctlMsgSize]byte
		m.put(b[:])
		got, err := parseCtlMsg(b[:])
		if err != nil || got != m {
			t.Fatalf("put %+v, parsed %+v (%v)", m, got, err)
		}
	}
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

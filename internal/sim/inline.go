package sim

import "math/rand/v2"

// Inline sends. ibv_post_send copies an inline WR's payload into the WQE before it returns, so
// the application may overwrite its buffer at once: the bytes are the WR's from then on,
// wherever and whenever the WR runs. In half the runs (a stream of the seed's own, so the
// others run as before) the QPs take up to inlineMax bytes inline, every SEND, WRITE and
// WRITE_WITH_IMM that short is posted inline, and its staging slot is overwritten as soon as
// the post returns. A layer that keeps an inline WR's address instead of its bytes (a held
// post, a repost) then delivers the overwritten bytes, which the receiver's and the WRITE's
// checks see: the failover layer's held sends did, until TestHeldInlineReusedBuffer.

// inlineStream names the stream ("INLINE").
const inlineStream = 0x494e4c494e45

// inlineMax is QPCap.MaxInlineData in the inline runs.
const inlineMax = 64

// drawInline returns the run's QPCap.MaxInlineData: inlineMax in half the runs, else 0.
func drawInline(seed uint64) int {
	if rand.New(rand.NewPCG(seed, inlineStream)).IntN(2) == 0 {
		return inlineMax
	}
	return 0
}

// scribble overwrites the staging slot of an inline WR once its post returned, with bytes
// intact never takes for the WR's (the sequence number in the first eight bytes inverted).
func scribble(p []byte, a, b, seq uint64) { fill(p, a, b, ^seq) }

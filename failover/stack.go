package failover

// The goroutines that run rounds (the engine, each backup device's completion-event loop,
// the link watcher: engine.doNow) start on a small stack, and a round's calls go deeper
// than an idle loop's: the runtime grew the stack at a round's first deep call, copying it
// at each doubling, and a later GC halved it again once the goroutine sat parked on less
// than a quarter of it. So each failure paid the growth on its critical path: 7–12 µs p50
// between taking the QP mutex and the round's first line alone, in a temporary trace of
// BenchmarkFallbackLatency (2026-11-30); with the stacks grown beforehand the benchmark's
// own share less the posts and the command fell by 20–40 µs p50 (docs/PERFORMANCE.md,
// tenth stop).
//
// onGrownStack grows the calling goroutine's stack to 128 KiB when the goroutine starts,
// off any failure's path (a frame of growFrame bytes needs that much), and runs fn below a
// frame of keepFrame bytes that stays live while fn runs: parked anywhere in fn, the
// goroutine uses at least a quarter of its stack, so the GC leaves it whole, and a round has
// about 96 KiB below the frame. The cost is 128 KiB of stack per such goroutine.
const (
	growFrame = 80 << 10
	keepFrame = 32 << 10
)

// onGrownStack runs fn on the calling goroutine with its stack grown and kept (above). The
// result only keeps the frame alive; callers drop it.
//
//go:noinline
func onGrownStack(fn func()) byte {
	growStack()
	var keep [keepFrame]byte
	keep[0] = 1
	fn()
	return keep[0] + keep[keepFrame-1]
}

// growStack takes a frame of growFrame bytes: the runtime grows the stack to hold it.
//
//go:noinline
func growStack() byte {
	var frame [growFrame]byte
	frame[0] = 1
	return frame[0] + frame[growFrame-1]
}

package failover

import "golang.org/x/sys/unix"

// A stepped context (Options.Stepped) has the forwarder without its reader goroutine: Step
// reads the default device's async descriptor without blocking (it is non-blocking) and
// forwards and acts on each event as run does. The emulator writes an event into the
// descriptor inside the call that raises it (a NIC's Kill inside a simulator step), so the
// step after it reads it: the same events at the same steps on every run.

// step reads every event waiting on the default device's descriptor, forwards it and acts
// on it (onAsyncEvent: a DEVICE_FATAL queues the fallbacks on the engine), and reports
// whether there was one.
func (f *asyncFwd) step() bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return false
	}
	f.flushLocked() // the application may have read some of those the full socket kept
	f.mu.Unlock()
	var b [16]byte
	got := false
	for {
		n, err := unix.Read(f.src, b[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return got // EAGAIN: nothing more; another error: the descriptor is gone
		}
		if n != len(b) {
			continue // not an event record: the kernel writes whole ones only
		}
		got = true
		f.forward(b)
		f.c.onAsyncEvent(f.c.def.DecodeAsyncEvent(b))
	}
}

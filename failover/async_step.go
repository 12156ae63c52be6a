package failover

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
	got, _ := readEvents(f.src, f.handle)
	return got
}

// handle forwards one event of the default device to the application and acts on it.
func (f *asyncFwd) handle(ev [16]byte) {
	f.forward(ev)
	f.c.onAsyncEvent(f.c.def.DecodeAsyncEvent(ev))
}

package failover

import (
	"sync/atomic"
	"unsafe"
)

// words returns the injection file's countdown and QPN words as atomics over the shared
// mapping (8-byte aligned: the mapping is page-aligned).
func (s *injectShared) words() (*atomic.Int64, *atomic.Uint32) {
	w := injectWordsOf(s.mem)
	return w.n, w.qpn
}

// Offsets of the switch and injection-request words in the injection file (layout in
// inject.go).
const (
	offSwitchQPN  = 16
	offSwitchOp   = 20
	offSwitchReq  = 24
	offSwitchDone = 32
	offSwitchRes  = 40
	offInjectReq  = 48
	offInjectDone = 56
)

// injectWords are the injection words of an injection file mapping: the countdown and QPN,
// and the request and answer sequences of a writer that waits for the arm (RequestInject).
type injectWords struct {
	n         *atomic.Int64
	qpn       *atomic.Uint32
	req, done *atomic.Uint64
}

// injectWordsOf returns the injection words of mem, as switchWordsOf.
func injectWordsOf(mem []byte) injectWords {
	_ = mem[InjectFileSize-1]
	return injectWords{
		n:    (*atomic.Int64)(unsafe.Pointer(&mem[0])),
		qpn:  (*atomic.Uint32)(unsafe.Pointer(&mem[8])),
		req:  (*atomic.Uint64)(unsafe.Pointer(&mem[offInjectReq])),
		done: (*atomic.Uint64)(unsafe.Pointer(&mem[offInjectDone])),
	}
}

// switchWords are the active-switching words of an injection file mapping.
type switchWords struct {
	qpn, op   *atomic.Uint32
	req, done *atomic.Uint64
	res       *atomic.Int32
}

// switchWordsOf returns the switch words of mem, a page-aligned mapping of at least
// InjectFileSize bytes (so every word is naturally aligned; shorter panics by the bounds
// check rather than reading past the mapping).
func switchWordsOf(mem []byte) switchWords {
	_ = mem[InjectFileSize-1]
	return switchWords{
		qpn:  (*atomic.Uint32)(unsafe.Pointer(&mem[offSwitchQPN])),
		op:   (*atomic.Uint32)(unsafe.Pointer(&mem[offSwitchOp])),
		req:  (*atomic.Uint64)(unsafe.Pointer(&mem[offSwitchReq])),
		done: (*atomic.Uint64)(unsafe.Pointer(&mem[offSwitchDone])),
		res:  (*atomic.Int32)(unsafe.Pointer(&mem[offSwitchRes])),
	}
}

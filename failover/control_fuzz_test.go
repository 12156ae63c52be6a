package failover

import (
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzControlFile: whatever a control file holds when a process maps it (left by a crash, or
// written by a confused writer), and whatever request a writer then stores, the watcher drops
// the pending request at mapping, answers each new request exactly once with one of the
// documented answers, and never panics.
func FuzzControlFile(f *testing.F) {
	f.Add(make([]byte, InjectFileSize), uint32(0x100), uint32(switchOpBackup))
	seed := make([]byte, InjectFileSize)
	for i := range seed {
		seed[i] = 0xff
	}
	f.Add(seed, uint32(0xffffff), uint32(7))
	f.Fuzz(func(t *testing.T, content []byte, qpn, op uint32) {
		mem, err := unix.Mmap(-1, 0, InjectFileSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Skip(err)
		}
		defer unix.Munmap(mem)
		copy(mem, content)
		// The watcher's state as startControl leaves it, without its goroutine: poll is
		// driven here.
		w := &controlWatcher{w: switchWordsOf(mem), inj: injectWordsOf(mem)}
		w.w.done.Store(w.w.req.Load())
		w.inj.done.Store(w.inj.req.Load())
		w.poll()
		if w.w.req.Load() != w.w.done.Load() || w.inj.req.Load() != w.inj.done.Load() {
			t.Fatal("a request left in the file at mapping was served or kept")
		}
		// An injection request is acknowledged once, whatever the words hold.
		iseq := w.inj.req.Load() + 1
		w.inj.req.Store(iseq)
		w.poll()
		w.poll()
		if w.inj.done.Load() != iseq {
			t.Fatalf("injection request %d not acknowledged (done %d)", iseq, w.inj.done.Load())
		}
		seq := w.w.req.Load() + 1
		w.w.qpn.Store(qpn)
		w.w.op.Store(op)
		w.w.req.Store(seq)
		w.poll()
		if w.w.done.Load() != seq {
			t.Fatalf("request %d not answered (done %d)", seq, w.w.done.Load())
		}
		// No context joined: every request names no QP of this process.
		if res := unix.Errno(w.w.res.Load()); res != unix.ENOENT {
			t.Fatalf("answer %v to a request with no QP, want ENOENT", res)
		}
		before := w.w.res.Load()
		w.poll() // nothing pending: no second answer
		if w.w.done.Load() != seq || w.w.res.Load() != before {
			t.Fatal("an answered request was answered again")
		}
	})
}

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/internal/rundir"
	"github.com/shift-rdma/shift/internal/shiftenv"
	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
	"golang.org/x/sys/unix"
)

// foHost is one emulated host under package failover: a context on its NIC 0 with NIC 1 as
// the backup, a PD, a CQ, a QP and one registered buffer.
type foHost struct {
	ctx *failover.Context
	pd  *failover.PD
	cq  *failover.CQ
	qp  *failover.QP
	buf *provider.Buffer
	mr  *failover.MR
	gid [16]byte
}

const foBufSize = 1 << 20

// openFOHost opens host h of cl; cleanup destroys everything in the order the failover layer
// expects (QP, then MR and CQ, then PD and context, memory last). The test process is a SHIFT
// process as the plugin makes one: what its environment asks (SHIFT_INJECT_SHM,
// XDG_RUNTIME_DIR: internal/shiftenv) completes the Options.
func openFOHost(t *testing.T, prefix string, h int, store kv.Store, job string, opts func(*failover.Options)) *foHost {
	t.Helper()
	o := failover.Options{Backups: []string{fmt.Sprintf("%s%d", prefix, 2*h+1)}, KV: store, Job: job,
		DrainTimeout: 20 * time.Second, HandshakeTimeout: 20 * time.Second}
	if opts != nil {
		opts(&o)
	}
	env, err := shiftenv.Read(os.Getenv)
	if err == nil {
		err = env.Fill(&o, fmt.Sprintf("%s%d", prefix, 2*h))
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := failover.Open(fmt.Sprintf("%s%d", prefix, 2*h), o)
	if err != nil {
		t.Fatal(err)
	}
	fh := &foHost{ctx: c}
	t.Cleanup(func() {
		wait := func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := c.WaitShadow(ctx); err != nil {
				t.Errorf("wait shadow: %v", err)
			}
		}
		var errs []error
		if fh.qp != nil {
			errs = append(errs, fh.qp.Destroy())
			wait()
		}
		if fh.mr != nil {
			errs = append(errs, fh.mr.Dereg())
		}
		if fh.cq != nil {
			errs = append(errs, fh.cq.Destroy())
		}
		if fh.pd != nil {
			errs = append(errs, fh.pd.Dealloc())
		}
		wait()
		errs = append(errs, c.Close())
		if fh.buf != nil {
			errs = append(errs, fh.buf.Free())
		}
		if err := errors.Join(errs...); err != nil {
			t.Errorf("host %d teardown: %v", h, err)
		}
	})
	if fh.pd, err = as[*failover.PD](c.AllocPD()); err != nil {
		t.Fatal(err)
	}
	if fh.cq, err = as[*failover.CQ](c.CreateCQ(verbs.CQInitAttr{CQE: 64})); err != nil {
		t.Fatal(err)
	}
	if fh.buf, err = provider.NewBuffer(foBufSize); err != nil {
		t.Fatal(err)
	}
	if fh.mr, err = as[*failover.MR](fh.pd.RegMR(fh.buf.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)); err != nil {
		t.Fatal(err)
	}
	if fh.qp, err = as[*failover.QP](fh.pd.CreateQP(verbs.QPInitAttr{SendCQ: fh.cq, RecvCQ: fh.cq,
		Cap: verbs.QPCap{MaxSendWR: 32, MaxRecvWR: 32, MaxSendSGE: 1, MaxRecvSGE: 1}})); err != nil {
		t.Fatal(err)
	}
	g, err := c.GIDByIndex(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.gid = g.GID
	return fh
}

// connectFOPair connects a's and b's QPs (first PSNs psnA, psnB) and waits until both
// contexts replayed their shadow verbs on the backups.
func connectFOPair(t *testing.T, a, b *foHost, psnA, psnB uint32) {
	t.Helper()
	attr := verbs.ConnectAttr{Timeout: 12, RetryCnt: 3, RNRRetry: 7, MinRNRTimer: 1}
	ea := verbs.Endpoint{QPN: a.qp.QPN(), PSN: psnA, GID: a.gid}
	eb := verbs.Endpoint{QPN: b.qp.QPN(), PSN: psnB, GID: b.gid}
	if err := verbs.Connect(a.qp, attr, ea, eb); err != nil {
		t.Fatal(err)
	}
	if err := verbs.Connect(b.qp, attr, eb, ea); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, h := range []*foHost{a, b} {
		if err := h.ctx.WaitShadow(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// writeAndWait posts one signaled WRITE of buffer slot i from a to b and waits for its
// completion, polling b's CQ too (never expecting anything there).
func writeAndWait(t *testing.T, a, b *foHost, i int, payload []byte) verbs.WC {
	t.Helper()
	off := i * len(payload)
	copy(a.buf.Bytes()[off:], payload)
	w := verbs.SendWR{WRID: uint64(1000 + i), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{a.mr.SGE(off, len(payload))}, RemoteAddr: b.mr.Addr() + uint64(off), RKey: b.mr.RKey()}
	if err := a.qp.PostSend([]verbs.SendWR{w}); err != nil {
		t.Fatalf("post WRITE %d: %v", i, err)
	}
	var wcs [4]verbs.WC
	deadline := time.Now().Add(60 * time.Second) // failure guard only
	for time.Now().Before(deadline) {
		n, err := a.cq.Poll(wcs[:])
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if m, _ := b.cq.Poll(wcs[n:]); m != 0 {
			t.Fatalf("unexpected completion on the target: %+v", wcs[n:n+m])
		}
		if n > 1 {
			t.Fatalf("more than one completion: %+v", wcs[:n])
		}
		if n == 1 {
			if got := b.buf.Bytes()[off : off+len(payload)]; !bytes.Equal(got, payload) {
				t.Fatalf("WRITE %d completed but the target holds other bytes", i)
			}
			return wcs[0]
		}
		time.Sleep(50 * time.Microsecond)
	}
	t.Fatalf("WRITE %d: no completion (send state %v)", i, a.qp.SendState())
	return verbs.WC{}
}

// End to end: this test process runs a failover context with SHIFT_INJECT_SHM=1 (so it maps
// its control file in the runtime directory, here under a fresh XDG_RUNTIME_DIR), and `shiftctl inject -pid <pid> -qpn <qpn>` arms the fault through
// that file. The next WRITE fails on the default NIC with a local protection error, SHIFT
// moves the QP to its backup, the application sees a successful completion and the data,
// and the context's fallback counter goes from 0 to 1. Before the injection, WRITEs stay on
// the default path.
func TestInjectEndToEnd(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", xdg)
	start, err := rundir.ProcStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	shm := filepath.Join(xdg, "shift", rundir.ControlName(os.Getpid(), start))
	prefix := fmt.Sprintf("inj%d_", os.Getpid())
	cl, err := emu.NewCluster(emu.ClusterConfig{Hosts: 2, NICs: 2, Register: true, Prefix: prefix, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	store, job := kv.NewMem(), fmt.Sprintf("inject%d", os.Getpid())
	// Host 1 opens before SHIFT_INJECT_SHM is set: only host 0 maps the file.
	b := openFOHost(t, prefix, 1, store, job, nil)
	t.Setenv("SHIFT_INJECT_SHM", "1")
	a := openFOHost(t, prefix, 0, store, job, nil)
	if _, err := os.Stat(shm); err != nil || a.ctx.ControlFile() != shm {
		t.Fatalf("the failover context did not create its injection file %s: %v (ControlFile %q, ControlErr %v)", shm, err, a.ctx.ControlFile(), a.ctx.ControlErr())
	}
	connectFOPair(t, a, b, 0x100, 0x9100)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	payload := func() []byte {
		p := make([]byte, 3000) // three 1024-byte packets at the emulator's default MTU
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	for i := range 3 {
		if wc := writeAndWait(t, a, b, i, payload()); wc.Status != verbs.WCSuccess {
			t.Fatalf("seed %d: WRITE %d before injection: %v", seed, i, wc.Status)
		}
	}
	if st := a.ctx.Stats(); st.Fallbacks != 0 || a.qp.SendState() != failover.SendDefault {
		t.Fatalf("before injection: %+v, state %v", st, a.qp.SendState())
	}

	var out, errw strings.Builder
	args := []string{"inject", "-pid", strconv.Itoa(os.Getpid()), "-qpn", fmt.Sprintf("%#x", a.qp.QPN()), "-n", "1"}
	if code := run(args, &out, &errw); code != 0 {
		t.Fatalf("shiftctl %v: exit %d: %s", args, code, errw.String())
	}
	if !strings.Contains(out.String(), "armed pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("output %q", out.String())
	}
	if wc := writeAndWait(t, a, b, 3, payload()); wc.Status != verbs.WCSuccess || wc.WRID != 1003 {
		t.Fatalf("seed %d: injected WRITE: %+v", seed, wc)
	}
	if st := a.ctx.Stats(); st.Fallbacks != 1 {
		t.Fatalf("fallback counter %d after the injected fault, want 1 (%+v)", st.Fallbacks, st)
	}
	if s := a.qp.SendState(); s != failover.SendFallback {
		t.Fatalf("send state %v, want Fallback", s)
	}
	// The fault fired once: the countdown is back at 0, and the next WRITE goes through
	// the backup without another fallback.
	mem, err := os.ReadFile(shm)
	if err != nil || len(mem) != failover.InjectFileSize {
		t.Fatalf("read %s: %v (%d bytes)", shm, err, len(mem))
	}
	if qpn, n := loadInject(mem); n != 0 || qpn != a.qp.QPN() {
		t.Errorf("injection words after the fault: qpn %#x countdown %d", qpn, n)
	}
	if wc := writeAndWait(t, a, b, 4, payload()); wc.Status != verbs.WCSuccess {
		t.Fatalf("seed %d: WRITE after fallback: %v", seed, wc.Status)
	}
	if st := a.ctx.Stats(); st.Fallbacks != 1 {
		t.Errorf("fallbacks %d after one more WRITE", st.Fallbacks)
	}
}

// The file layout and store order package failover reads, and the refusals.
func TestInjectFileErrors(t *testing.T) {
	dir := t.TempDir()
	me := strconv.Itoa(os.Getpid())
	var out, errw strings.Builder
	// No file: the error names the file, the remedy and ENOENT.
	missing := filepath.Join(dir, "absent")
	err := injectMain([]string{"-pid", me, "-file", missing}, &out)
	if !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), "SHIFT_INJECT_SHM=1") || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	// A file of the wrong size is not ours.
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, make([]byte, 8), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := injectMain([]string{"-pid", me, "-file", bad}, &out); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "size 8") {
		t.Errorf("wrong size: %v", err)
	}
	// A process that does not exist: ESRCH. Find a free pid below pid_max.
	dead := 0
	for p := 4194000; p > 1000; p-- {
		if unix.Kill(p, 0) == unix.ESRCH {
			dead = p
			break
		}
	}
	if dead != 0 {
		if err := injectMain([]string{"-pid", strconv.Itoa(dead)}, &out); !errors.Is(err, unix.ESRCH) {
			t.Errorf("pid %d: %v", dead, err)
		}
	}
	// Command-line errors exit 2 with EINVAL.
	for _, args := range [][]string{{"inject"}, {"inject", "-pid", me, "-qpn", "0"}, {"inject", "-pid", me, "-qpn", "0x1000000"},
		{"inject", "-pid", me, "-n", "-1"}, {"inject", "-pid", me, "stray"}, {"inject", "-bogus"}} {
		if code := run(args, &out, &errw); code != 2 {
			t.Errorf("%v: exit %d", args, code)
		}
	}
	// A good file no process maps: QPN and countdown land at offsets 8 and 0 in native
	// order and the request sequence at 48, but nobody acknowledges (ErrNoAnswer, exit 1
	// through run); once the watcher's sequence at 56 caught up, -n 0 disarms.
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, make([]byte, failover.InjectFileSize), 0o600); err != nil {
		t.Fatal(err)
	}
	err = injectMain([]string{"-pid", me, "-file", good, "-qpn", "0x1a2b", "-n", "7", "-timeout", "20ms"}, &out)
	if !errors.Is(err, failover.ErrNoAnswer) || !strings.Contains(err.Error(), "did not acknowledge") {
		t.Errorf("unmapped file: %v, want ErrNoAnswer", err)
	}
	mem, _ := os.ReadFile(good)
	if qpn, n := loadInject(mem); qpn != 0x1a2b || n != 7 || binary.NativeEndian.Uint64(mem[48:]) != 1 {
		t.Errorf("words %#x %d, request %d", qpn, n, binary.NativeEndian.Uint64(mem[48:]))
	}
	// The next request waits for the unanswered one and writes nothing.
	if err := injectMain([]string{"-pid", me, "-file", good, "-n", "0", "-timeout", "20ms"}, &out); !errors.Is(err, failover.ErrNoAnswer) {
		t.Errorf("behind an unanswered request: %v", err)
	}
	if mem, _ = os.ReadFile(good); binary.NativeEndian.Uint64(mem[48:]) != 1 {
		t.Errorf("a request behind an unanswered one was written: %d", binary.NativeEndian.Uint64(mem[48:]))
	}
	var done [8]byte
	binary.NativeEndian.PutUint64(done[:], 1) // a watcher's answer
	if f, err := os.OpenFile(good, os.O_WRONLY, 0); err != nil {
		t.Fatal(err)
	} else if _, err := f.WriteAt(done[:], 56); err != nil || f.Close() != nil {
		t.Fatal(err)
	}
	if err := injectMain([]string{"-pid", me, "-file", good, "-n", "0", "-timeout", "20ms"}, &out); !errors.Is(err, failover.ErrNoAnswer) {
		t.Errorf("disarm: %v", err)
	}
	mem, _ = os.ReadFile(good)
	if qpn, n := loadInject(mem); qpn != 0 || n != 0 || binary.NativeEndian.Uint64(mem[48:]) != 2 {
		t.Errorf("after disarm (all QPs): %#x %d, request %d", qpn, n, binary.NativeEndian.Uint64(mem[48:]))
	}
	if code := run([]string{"inject", "-pid", me, "-file", good, "-timeout", "0s"}, &out, &errw); code != 2 {
		t.Errorf("-timeout 0s: exit %d", code)
	}
}

// loadInject reads the injection words of a control file's contents: the QPN at offset 8 and
// the countdown at 0, in native order.
func loadInject(mem []byte) (qpn uint32, n int64) {
	return binary.NativeEndian.Uint32(mem[8:]), int64(binary.NativeEndian.Uint64(mem))
}

// as converts the interface a verbs constructor returns to the implementation's type.
func as[T any](v any, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}

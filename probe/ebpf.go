package probe

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/shift-rdma/shift/internal/fdwait"
)

// bpfSource is a loaded eBPF source: its programs, their attachments and the ring buffer
// through which they report. The programs are assembled here with cilium/ebpf's asm
// package, so building the module needs no clang.
type bpfSource struct {
	src Source
	rd  *ringbuf.Reader
	// wake is a duplicate of the ring buffer's descriptor registered with the runtime's
	// network poller (rbwait.go); nil where that failed (rd then blocks in epoll_wait).
	wake  *fdwait.File
	links []link.Link
	progs []*ebpf.Program
	maps  []*ebpf.Map
}

// fexitRecord is what the fexit programs write: the device's ifindex and 1 for carrier on,
// 0 for off (two native-endian u32).
const fexitRecordLen = 8

func (b *bpfSource) close() error {
	var errs []error
	if b.wake != nil {
		errs = append(errs, b.wake.Close()) // first: ends bpfLoop's wait
	}
	if b.rd != nil {
		errs = append(errs, b.rd.Close())
	}
	for _, l := range b.links {
		errs = append(errs, l.Close())
	}
	for _, p := range b.progs {
		errs = append(errs, p.Close())
	}
	for _, m := range b.maps {
		errs = append(errs, m.Close())
	}
	return errors.Join(errs...)
}

// memberOffset is the byte offset of the member named by path (outer to inner) in the
// kernel's struct typ, from the running kernel's BTF.
func memberOffset(spec *btf.Spec, typ string, path ...string) (int16, error) {
	var s *btf.Struct
	if err := spec.TypeByName(typ, &s); err != nil {
		return 0, fmt.Errorf("BTF struct %s: %w", typ, err)
	}
	var off btf.Bits
	var cur btf.Type = s
	for _, name := range path {
		st, ok := btf.UnderlyingType(cur).(*btf.Struct)
		if !ok {
			return 0, fmt.Errorf("BTF %s: %s is not in a struct", typ, name)
		}
		found := false
		for _, m := range st.Members {
			if m.Name == name {
				off += m.Offset
				cur = m.Type
				found = true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("BTF struct %s has no member %s", typ, strings.Join(path, "."))
		}
	}
	if off%8 != 0 || off/8 > 1<<15-1 {
		return 0, fmt.Errorf("BTF %s.%s at bit %d: not a usable byte offset", typ, strings.Join(path, "."), off)
	}
	return int16(off / 8), nil
}

// startFexit loads fexit programs on netif_carrier_off and netif_carrier_on that report the
// device's ifindex when it is one of ifindexes (a hash map filled here). fexit rather than
// fentry: the program runs after the function, so the state that the watcher then reads
// already holds the change. ifindexes are not unique across network namespaces; the watcher
// reads the link in its own namespace and reports nothing when it did not change.
func startFexit(ifindexes []int) (_ *bpfSource, err error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("kernel BTF: %w", err)
	}
	ifindexOff, err := memberOffset(spec, "net_device", "ifindex")
	if err != nil {
		return nil, err
	}
	b := &bpfSource{src: SourceFexit}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	rb, err := ebpf.NewMap(&ebpf.MapSpec{Name: "shift_link_rb", Type: ebpf.RingBuf, MaxEntries: 1 << 16})
	if err != nil {
		return nil, fmt.Errorf("ring buffer: %w", err)
	}
	b.maps = append(b.maps, rb)
	watch, err := ebpf.NewMap(&ebpf.MapSpec{Name: "shift_link_idx", Type: ebpf.Hash, KeySize: 4, ValueSize: 1,
		MaxEntries: uint32(len(ifindexes))})
	if err != nil {
		return nil, fmt.Errorf("ifindex map: %w", err)
	}
	b.maps = append(b.maps, watch)
	for _, idx := range ifindexes {
		if err := watch.Put(uint32(idx), uint8(1)); err != nil {
			return nil, fmt.Errorf("ifindex map: put %d: %w", idx, err)
		}
	}
	for _, fn := range []struct {
		name string
		up   int32
	}{{"netif_carrier_off", 0}, {"netif_carrier_on", 1}} {
		insns := deviceFilterProgram(0, ifindexOff, fn.up, watch.FD(), rb.FD())
		p, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
			Name: "shift_" + fn.name[5:], Type: ebpf.Tracing, AttachType: ebpf.AttachTraceFExit,
			AttachTo: fn.name, Instructions: insns, License: "GPL",
		}, ebpf.ProgramOptions{KernelTypes: spec})
		if err != nil {
			return nil, fmt.Errorf("load fexit/%s: %w", fn.name, err)
		}
		b.progs = append(b.progs, p)
		l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceFExit})
		if err != nil {
			return nil, fmt.Errorf("attach fexit/%s: %w", fn.name, err)
		}
		b.links = append(b.links, l)
	}
	if b.rd, err = ringbuf.NewReader(rb); err != nil {
		return nil, fmt.Errorf("ring buffer reader: %w", err)
	}
	b.wake, _ = fdwait.Dup(rb.FD(), "ringbuf") // nil: rd waits in epoll_wait
	return b, nil
}

// deviceFilterProgram is the body of the fexit programs: take the struct net_device *
// argument number arg of the traced function, and if its ifindex (at byte ifindexOff) is a
// key of the hash map watchFD, write the record {ifindex, up} to the ring buffer rbFD.
func deviceFilterProgram(arg, ifindexOff int16, up int32, watchFD, rbFD int) asm.Instructions {
	return asm.Instructions{
		// r6 = dev, r7 = dev->ifindex (trusted BTF pointer: direct load)
		asm.LoadMem(asm.R6, asm.R1, 8*arg, asm.DWord),
		asm.LoadMem(asm.R7, asm.R6, ifindexOff, asm.Word),
		asm.StoreMem(asm.RFP, -8, asm.R7, asm.Word),
		// if !watch[ifindex] return 0
		asm.LoadMapPtr(asm.R1, watchFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		// record {ifindex, up}; ringbuf_output(rb, &rec, 8, 0)
		asm.StoreImm(asm.RFP, -4, int64(up), asm.Word),
		asm.LoadMapPtr(asm.R1, rbFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.Mov.Imm(asm.R3, fexitRecordLen),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnRingbufOutput.Call(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}
}

// startTracepoint loads a program on the workqueue_queue_work BTF tracepoint that reports
// when the queued work is the link watch (work->func == linkwatch_event). netif_carrier_off
// and netif_carrier_on update the carrier and its counters and then schedule that work, so
// the program fires at the flip, before the link watch runs and before netlink speaks. The
// tracepoint does not say which device changed: the watcher reads all watched links.
func startTracepoint() (_ *bpfSource, err error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("kernel BTF: %w", err)
	}
	funcOff, err := memberOffset(spec, "work_struct", "func")
	if err != nil {
		return nil, err
	}
	addr, err := ksymAddr("linkwatch_event")
	if err != nil {
		return nil, err
	}
	b := &bpfSource{src: SourceTracepoint}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	rb, err := ebpf.NewMap(&ebpf.MapSpec{Name: "shift_lw_rb", Type: ebpf.RingBuf, MaxEntries: 1 << 16})
	if err != nil {
		return nil, fmt.Errorf("ring buffer: %w", err)
	}
	b.maps = append(b.maps, rb)
	// workqueue_queue_work(int req_cpu, struct pool_workqueue *pwq, struct work_struct *work)
	// fires when the link watch is scheduled; workqueue_execute_start(struct work_struct
	// *work) when it runs. The second catches a carrier change that found the work already
	// pending (scheduled for another device), which queues nothing.
	for _, tp := range []struct {
		name string
		arg  int16
	}{{"workqueue_queue_work", 2}, {"workqueue_execute_start", 0}} {
		insns := asm.Instructions{
			asm.LoadMem(asm.R2, asm.R1, 8*tp.arg, asm.DWord),
			asm.LoadMem(asm.R3, asm.R2, funcOff, asm.DWord),
			asm.LoadImm(asm.R4, int64(addr), asm.DWord),
			asm.JNE.Reg(asm.R3, asm.R4, "out"),
			asm.FnKtimeGetNs.Call(),
			asm.StoreMem(asm.RFP, -8, asm.R0, asm.DWord),
			asm.LoadMapPtr(asm.R1, rb.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -8),
			asm.Mov.Imm(asm.R3, 8),
			asm.Mov.Imm(asm.R4, 0),
			asm.FnRingbufOutput.Call(),
			asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
			asm.Return(),
		}
		p, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
			Name: "shift_lw_" + tp.name[10:15], Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp,
			AttachTo: tp.name, Instructions: insns, License: "GPL",
		}, ebpf.ProgramOptions{KernelTypes: spec})
		if err != nil {
			return nil, fmt.Errorf("load tp_btf/%s: %w", tp.name, err)
		}
		b.progs = append(b.progs, p)
		l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			return nil, fmt.Errorf("attach tp_btf/%s: %w", tp.name, err)
		}
		b.links = append(b.links, l)
	}
	if b.rd, err = ringbuf.NewReader(rb); err != nil {
		return nil, fmt.Errorf("ring buffer reader: %w", err)
	}
	b.wake, _ = fdwait.Dup(rb.FD(), "ringbuf") // nil: rd waits in epoll_wait
	return b, nil
}

// ksymAddr is the address of a kernel text symbol from /proc/kallsyms (shown only with
// CAP_SYSLOG; otherwise every address reads 0).
func ksymAddr(name string) (uint64, error) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return 0, fmt.Errorf("kallsyms: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "ffffffff81e89350 t linkwatch_event" (module symbols add "\t[mod]")
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || fields[2] != name || (fields[1] != "t" && fields[1] != "T") {
			continue
		}
		a, err := strconv.ParseUint(fields[0], 16, 64)
		if err != nil {
			return 0, fmt.Errorf("kallsyms: %s: %w", name, err)
		}
		if a == 0 {
			return 0, fmt.Errorf("kallsyms: %s: address hidden (needs CAP_SYSLOG): %w", name, os.ErrPermission)
		}
		return a, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("kallsyms: %w", err)
	}
	return 0, fmt.Errorf("kallsyms: no symbol %s: %w", name, os.ErrNotExist)
}

// decodeFexit reads a fexit record.
func decodeFexit(raw []byte) (ifindex int, ok bool) {
	if len(raw) < fexitRecordLen {
		return 0, false
	}
	return int(binary.NativeEndian.Uint32(raw[:4])), true
}

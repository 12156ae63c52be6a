package probe

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/shift-rdma/shift/internal/netnstest"
)

// TestDeviceFilterProgram checks the fexit programs' body where fexit cannot load (this
// sandbox refuses trampolines with EPERM): the same instructions, reading the struct
// net_device * argument, run on the tp_btf/net_dev_xmit tracepoint (dev is its third
// argument). Packets sent from a veth end whose ifindex is in the map produce records with
// that ifindex; transmissions of the other end (ARP replies, IPv6 chatter) none.
func TestDeviceFilterProgram(t *testing.T) {
	p := newPair(t, false)
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Skipf("no kernel BTF: %v", err)
	}
	off, err := memberOffset(spec, "net_device", "ifindex")
	if err != nil {
		t.Fatal(err)
	}
	rb, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.RingBuf, MaxEntries: 1 << 16})
	if err != nil {
		t.Skipf("eBPF maps refused: %v", err)
	}
	defer rb.Close()
	watchMap, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 4, ValueSize: 1, MaxEntries: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer watchMap.Close()
	prog, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "net_dev_xmit",
		Instructions: deviceFilterProgram(2, off, 1, watchMap.FD(), rb.FD()), License: "GPL",
	}, ebpf.ProgramOptions{KernelTypes: spec})
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			t.Skipf("tp_btf refused here: %v", err)
		}
		t.Fatalf("the fexit body does not load as tp_btf/net_dev_xmit: %v", err)
	}
	defer prog.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rd, err := ringbuf.NewReader(rb)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()

	send := func(from, to *netnstest.Veth) {
		t.Helper()
		err := from.NS.Do(func() error {
			c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: to.Addr.Addr().AsSlice(), Port: 9})
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("probe"))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// expect sends from `from` and reads the next record, failing unless it is want's: only the
	// map's index may pass the filter.
	expect := func(from, to *netnstest.Veth, want int) {
		t.Helper()
		if err := watchMap.Put(uint32(want), uint8(1)); err != nil {
			t.Fatal(err)
		}
		send(from, to)
		rd.SetDeadline(time.Now().Add(10 * time.Second))
		rec, err := rd.Read()
		if err != nil {
			t.Fatalf("no record for ifindex %d: %v", want, err)
		}
		idx, ok := decodeFexit(rec.RawSample)
		if !ok || rec.RawSample[4] != 1 {
			t.Fatalf("record %x", rec.RawSample)
		}
		if idx != want {
			t.Fatalf("record for ifindex %d passed a filter on %d", idx, want)
		}
	}
	expect(p.a, p.b, p.a.Index)
	if err := watchMap.Delete(uint32(p.a.Index)); err != nil {
		t.Fatal(err)
	}
	// Drain what the first exchange left (ARP replies of the watched end).
	rd.SetDeadline(time.Now().Add(100 * time.Millisecond))
	for {
		if _, err := rd.Read(); err != nil {
			break
		}
	}
	expect(p.b, p.a, p.b.Index)
}

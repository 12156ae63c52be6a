package uverbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// Offsets below are those of the C headers (rdma_user_ioctl_cmds.h), written out so that this
// test does not trust the Go structs it checks.
func TestIoctlMarshalBytes(t *testing.T) {
	long := []byte("0123456789abcdef") // 16 bytes: must go by pointer
	out := make([]byte, 24)
	c := NewIoctl(ObjectQP, MethodQPCreate, DriverIDRXE)
	c.InObj(AttrCreateQPPDHandle, 7)
	c.OutObj(AttrCreateQPHandle)
	c.InU64(AttrCreateQPType, QPTypeRC)
	c.InU32(AttrCreateQPFlags, 0x1000)
	c.In(AttrCreateQPCap, []byte{1, 2, 3})
	c.In(AttrUHWIn, long)
	c.Out(AttrUHWOut, out)
	c.Optional(c.InFD(AttrCreateQPEventFD, 5))
	b := c.Bytes()
	le := binary.NativeEndian
	if got, want := len(b), 24+8*16; got != want {
		t.Fatalf("len = %d, want %d", got, want)
	}
	if le.Uint16(b[0:]) != uint16(len(b)) || le.Uint16(b[2:]) != ObjectQP || le.Uint16(b[4:]) != MethodQPCreate ||
		le.Uint16(b[6:]) != 8 || le.Uint64(b[8:]) != 0 || le.Uint32(b[16:]) != DriverIDRXE || le.Uint32(b[20:]) != 0 {
		t.Fatalf("header % x", b[:24])
	}
	type want struct {
		id, len, flags uint16
		data           uint64
	}
	ws := []want{
		{AttrCreateQPPDHandle, 0, AttrFMandatory, 7},
		{AttrCreateQPHandle, 0, AttrFMandatory, 0},
		{AttrCreateQPType, 8, AttrFMandatory, QPTypeRC},
		{AttrCreateQPFlags, 4, AttrFMandatory, 0x1000},
		{AttrCreateQPCap, 3, AttrFMandatory, 0x030201},
		{AttrUHWIn, 16, AttrFMandatory, Addr(long)},
		{AttrUHWOut, 24, AttrFMandatory, Addr(out)},
		{AttrCreateQPEventFD, 0, 0, 5},
	}
	for i, w := range ws {
		a := b[24+16*i:]
		got := want{le.Uint16(a[0:]), le.Uint16(a[2:]), le.Uint16(a[4:]), le.Uint64(a[8:])}
		if got != w || a[6] != 0 || a[7] != 0 {
			t.Errorf("attr %d = %+v (attr_data % x), want %+v", i, got, a[6:8], w)
		}
	}
}

func TestIoctlRoundTrip(t *testing.T) {
	longIn := bytes.Repeat([]byte{0xab}, 40)
	k := &fakeKernel{ioctl: func(r *IoctlRequest) error {
		if r.Hdr.Object_id != ObjectCQ || r.Hdr.Method_id != MethodCQCreate || r.Hdr.Driver_id != DriverIDMLX5 {
			return unix.EPROTONOSUPPORT
		}
		if err := r.Check([]AttrSpec{
			{ID: AttrCreateCQHandle, Kind: AttrIDR, Mandatory: true},
			{ID: AttrCreateCQCQE, Kind: AttrPtrIn, Mandatory: true, MinLen: 4, MaxLen: 4},
			{ID: AttrCreateCQUserHandle, Kind: AttrPtrIn, Mandatory: true, MinLen: 8, MaxLen: 8},
			{ID: AttrCreateCQCompChannel, Kind: AttrFD},
			{ID: AttrCreateCQCompVector, Kind: AttrPtrIn, Mandatory: true, MinLen: 4, MaxLen: 4},
			{ID: AttrCreateCQEventFD, Kind: AttrFD},
			{ID: AttrCreateCQRespCQE, Kind: AttrPtrOut, Mandatory: true, MinLen: 4, MaxLen: 4},
			{ID: AttrUHWIn, Kind: AttrPtrIn},
			{ID: AttrUHWOut, Kind: AttrPtrOut},
		}); err != nil {
			return err
		}
		cqe, _ := r.Const(AttrCreateCQCQE)
		uh, _ := r.Const(AttrCreateCQUserHandle)
		ch, _ := r.FD(AttrCreateCQCompChannel)
		if cqe != 100 || uh != 0x1122334455667788 || ch != 9 {
			return unix.EINVAL
		}
		in, outLen, err := r.Driver()
		if err != nil {
			return err
		}
		if !bytes.Equal(in, longIn) || outLen != 12 {
			return unix.EINVAL
		}
		if err := r.Out(AttrCreateCQRespCQE, []byte{128, 0, 0, 0}); err != nil {
			return err
		}
		if err := r.SetObj(AttrCreateCQHandle, 42); err != nil {
			return err
		}
		// A driver response longer than the caller's buffer is truncated.
		return r.DriverOut(bytes.Repeat([]byte{0xcd}, 20))
	}}
	dout := make([]byte, 12)
	cq, err := CreateCQ(k, DriverIDMLX5, CreateCQRequest{CQE: 100, UserHandle: 0x1122334455667788,
		CompChannel: 9, AsyncFD: -1}, longIn, dout)
	if err != nil {
		t.Fatal(err)
	}
	if cq != (CQ{Handle: 42, CQE: 128}) {
		t.Errorf("cq = %+v", cq)
	}
	if !bytes.Equal(dout, bytes.Repeat([]byte{0xcd}, 12)) {
		t.Errorf("driver out = % x", dout)
	}
}

func TestIoctlValidOutputAndFD(t *testing.T) {
	k := &fakeKernel{ioctl: func(r *IoctlRequest) error {
		return r.SetFD(AttrAsyncEventAllocFDHandle, 17)
	}}
	fd, err := AllocAsyncFD(k, 0)
	if err != nil || fd != 17 {
		t.Fatalf("fd %d err %v", fd, err)
	}
	var got [8]byte
	c := NewIoctl(ObjectDevice, MethodGetContext, 0)
	unused := c.Out(AttrGetContextNumCompVectors, make([]byte, 4))
	used := c.Out(AttrGetContextCoreSupport, got[:])
	k.ioctl = func(r *IoctlRequest) error { return r.Out(AttrGetContextCoreSupport, []byte{1, 2, 3, 4, 5, 6, 7, 8}) }
	if err := c.Exec(k, "ioctl GET_CONTEXT"); err != nil {
		t.Fatal(err)
	}
	if c.Valid(unused) || !c.Valid(used) || got != [8]byte{1, 2, 3, 4, 5, 6, 7, 8} {
		t.Errorf("valid %v/%v data % x", c.Valid(unused), c.Valid(used), got)
	}
}

func TestParseIoctlErrors(t *testing.T) {
	good := NewIoctl(ObjectDevice, MethodQueryPort, 0)
	good.InU64(AttrQueryPortPortNum, 1)
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good.Bytes()...)) }
	le := binary.NativeEndian
	cases := []struct {
		name string
		buf  []byte
		want unix.Errno
	}{
		{"short", make([]byte, 10), unix.EFAULT},
		{"length mismatch", mut(func(b []byte) []byte { le.PutUint16(b, 30); return b }), unix.EINVAL},
		{"num_attrs mismatch", mut(func(b []byte) []byte { le.PutUint16(b[6:], 2); return b }), unix.EINVAL},
		{"over a page", mut(func(b []byte) []byte { le.PutUint16(b, 4096+40); le.PutUint16(b[6:], 255); return b }), unix.EINVAL},
		{"reserved1", mut(func(b []byte) []byte { b[8] = 1; return b }), unix.EPROTONOSUPPORT},
		{"reserved2", mut(func(b []byte) []byte { b[20] = 1; return b }), unix.EPROTONOSUPPORT},
		{"truncated attrs", mut(func(b []byte) []byte { return b[:30] }), unix.EFAULT},
	}
	for _, c := range cases {
		if _, err := ParseIoctl(c.buf); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := ParseIoctl(good.Bytes()); err != nil {
		t.Errorf("good buffer: %v", err)
	}
}

func TestIoctlCheckRules(t *testing.T) {
	specs := []AttrSpec{
		{ID: 1, Kind: AttrPtrIn, Mandatory: true, MinLen: 4, MaxLen: 8},
		{ID: 2, Kind: AttrIDR},
	}
	build := func(f func(c *Ioctl)) *IoctlRequest {
		c := NewIoctl(0, 0, 0)
		f(c)
		r, err := ParseIoctl(c.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	cases := []struct {
		name string
		f    func(c *Ioctl)
		want error
	}{
		{"ok", func(c *Ioctl) { c.InU32(1, 5) }, nil},
		{"unknown optional ignored", func(c *Ioctl) { c.InU32(1, 5); c.Optional(c.InU32(9, 1)) }, nil},
		{"unknown mandatory", func(c *Ioctl) { c.InU32(1, 5); c.InU32(9, 1) }, unix.EPROTONOSUPPORT},
		{"missing mandatory", func(c *Ioctl) { c.InObj(2, 1) }, unix.EINVAL},
		{"duplicate", func(c *Ioctl) { c.InU32(1, 5); c.InU32(1, 6) }, unix.EINVAL},
		{"too short", func(c *Ioctl) { c.In(1, []byte{1, 2}) }, unix.EINVAL},
		{"too long", func(c *Ioctl) { c.In(1, make([]byte, 9)) }, unix.EINVAL},
		{"idr with length", func(c *Ioctl) { c.InU32(1, 5); c.InU32(2, 1) }, unix.EINVAL},
		{"reserved attr_data", func(c *Ioctl) { c.InU32(1, 5); c.attrs[0].Attr_data[1] = 1 }, unix.EINVAL},
	}
	for _, c := range cases {
		err := build(c.f).Check(specs)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
}

func TestIoctlErrorNamesCommand(t *testing.T) {
	k := &fakeKernel{ioctl: func(r *IoctlRequest) error { return unix.EINVAL }}
	err := DeallocPD(k, 0, 3)
	var ce *CmdError
	if !errors.As(err, &ce) || ce.Op != "ioctl PD_DESTROY" || !errors.Is(err, unix.EINVAL) {
		t.Fatalf("err = %v", err)
	}
	if msg := err.Error(); msg != "uverbs: ioctl PD_DESTROY: invalid argument (EINVAL)" {
		t.Errorf("message %q", msg)
	}
	// A length the ABI cannot carry is refused before the kernel sees it.
	c := NewIoctl(0, 0, 0)
	c.In(1, make([]byte, 70000))
	if err := c.Exec(k, "ioctl X"); !errors.Is(err, unix.EINVAL) || len(k.raw) != 1 {
		t.Errorf("oversized attr: %v (sent %d buffers)", err, len(k.raw))
	}
}

func TestCopyUserFault(t *testing.T) {
	b := make([]byte, 8)
	if err := CopyFromUser(b, 0); !errors.Is(err, unix.EFAULT) {
		t.Errorf("nil address: %v", err)
	}
	// The first page is never mapped in a Go process.
	if err := CopyFromUser(b, 0x100); !errors.Is(err, unix.EFAULT) {
		t.Errorf("unmapped address: %v", err)
	}
	if err := CopyToUser(0x100, b); !errors.Is(err, unix.EFAULT) {
		t.Errorf("unmapped address (write): %v", err)
	}
	src := []byte("payload!")
	if err := CopyFromUser(b, Addr(src)); err != nil || string(b) != "payload!" {
		t.Errorf("good copy: %q %v", b, err)
	}
}

package uverbs

import (
	"encoding/binary"
	"fmt"
	"runtime"
)

const (
	// MaxIoctlLength is the kernel's limit on ib_uverbs_ioctl_hdr.length (one page).
	MaxIoctlLength = 4096
	// inlineMax is how many bytes of a PTR_IN attribute travel inline in ib_uverbs_attr.data
	// instead of behind a pointer (uverbs_attr_ptr_is_inline).
	inlineMax = 8
)

// Ioctl builds one RDMA_VERBS_IOCTL call: struct ib_uverbs_ioctl_hdr followed by its struct
// ib_uverbs_attr array, marshalled as rdma-core's libibverbs/cmd_ioctl.c does. Each add method
// returns the attribute's index, used after Exec to read what the kernel wrote back (the
// VALID_OUTPUT flag, new IDR handles and fds).
//
// Every attribute is sent with UVERBS_ATTR_F_MANDATORY, as rdma-core does, unless Optional is
// called for it: a kernel that does not know a mandatory attribute fails the call with
// EPROTONOSUPPORT instead of ignoring it.
type Ioctl struct {
	hdr   IoctlHdr
	attrs []Attr
	keep  [][]byte // buffers whose addresses are inside attrs
	buf   []byte
	bad   bool // an attribute could not be marshalled; Exec refuses to send
}

// NewIoctl starts a call of method on object. driverID is the device's enum rdma_driver_id;
// the kernel rejects a mismatch with EINVAL.
func NewIoctl(object, method uint16, driverID uint32) *Ioctl {
	return &Ioctl{hdr: IoctlHdr{Object_id: object, Method_id: method, Driver_id: driverID}}
}

func (c *Ioctl) add(a Attr) int {
	a.Flags |= AttrFMandatory
	c.attrs = append(c.attrs, a)
	return len(c.attrs) - 1
}

// Optional clears the mandatory flag of attribute idx.
func (c *Ioctl) Optional(idx int) { c.attrs[idx].Flags &^= AttrFMandatory }

// InU64 adds a PTR_IN attribute of 8 inline bytes; this is also how UVERBS_ATTR_CONST_IN and
// enum-valued attributes are passed (fill_attr_const_in).
func (c *Ioctl) InU64(id uint16, v uint64) int {
	return c.add(Attr{Attr_id: id, Len: 8, Data: v})
}

// InU32 adds a PTR_IN attribute of 4 inline bytes.
func (c *Ioctl) InU32(id uint16, v uint32) int {
	return c.add(Attr{Attr_id: id, Len: 4, Data: uint64(v)})
}

// In adds a PTR_IN attribute: up to 8 bytes travel inline, longer data behind a pointer. The
// ABI carries the length in 16 bits; longer data makes Exec fail with EINVAL, as rdma-core's
// buffer_error does.
func (c *Ioctl) In(id uint16, data []byte) int {
	a := Attr{Attr_id: id, Len: uint16(len(data))}
	if len(data) > 0xffff {
		c.bad = true
	}
	if len(data) <= inlineMax {
		var in [8]byte
		copy(in[:], data)
		a.Data = binary.NativeEndian.Uint64(in[:])
	} else {
		c.keep = append(c.keep, data)
		a.Data = Addr(data)
	}
	return c.add(a)
}

// Out adds a PTR_OUT attribute: the kernel writes up to len(buf) bytes to buf and sets
// UVERBS_ATTR_F_VALID_OUTPUT. Output always goes through the pointer, whatever its size.
func (c *Ioctl) Out(id uint16, buf []byte) int {
	a := Attr{Attr_id: id, Len: uint16(len(buf))}
	if len(buf) > 0xffff {
		c.bad = true
	}
	c.keep = append(c.keep, buf)
	a.Data = Addr(buf)
	return c.add(a)
}

// InObj adds an IDR attribute naming an existing object by handle.
func (c *Ioctl) InObj(id uint16, handle uint32) int {
	return c.add(Attr{Attr_id: id, Data: uint64(handle)})
}

// OutObj adds an IDR attribute for an object the method creates; read the handle with Obj.
func (c *Ioctl) OutObj(id uint16) int { return c.add(Attr{Attr_id: id}) }

// InFD adds an FD attribute naming an existing file descriptor (completion channel, async fd).
func (c *Ioctl) InFD(id uint16, fd int) int {
	return c.add(Attr{Attr_id: id, Data: uint64(int64(fd))})
}

// OutFD adds an FD attribute for a descriptor the method creates; read it with FD.
func (c *Ioctl) OutFD(id uint16) int { return c.add(Attr{Attr_id: id}) }

// UHW adds the driver-private attributes: UVERBS_ATTR_UHW_IN with driverIn and
// UVERBS_ATTR_UHW_OUT with driverOut, each only when non-empty (as _write_set_uhw does).
func (c *Ioctl) UHW(driverIn, driverOut []byte) {
	if len(driverIn) > 0 {
		c.In(AttrUHWIn, driverIn)
	}
	if len(driverOut) > 0 {
		c.Out(AttrUHWOut, driverOut)
	}
}

// Bytes marshals the header and attribute array as the kernel reads them.
func (c *Ioctl) Bytes() []byte {
	n := IoctlHdrSize + AttrSize*len(c.attrs)
	if cap(c.buf) < n {
		c.buf = make([]byte, n)
	}
	b := c.buf[:n]
	h := c.hdr
	h.Length = uint16(n)
	h.Num_attrs = uint16(len(c.attrs))
	copy(b, structBytes(&h))
	for i := range c.attrs {
		copy(b[IoctlHdrSize+i*AttrSize:], structBytes(&c.attrs[i]))
	}
	return b
}

// Exec sends the call to f and, on success, reads the attribute array back so that Obj, FD and
// Valid see what the kernel wrote. A failure is a *CmdError naming op.
func (c *Ioctl) Exec(f File, op string) error {
	if c.bad || len(c.attrs) > (MaxIoctlLength-IoctlHdrSize)/AttrSize {
		return &CmdError{Op: op, Errno: errEINVAL}
	}
	b := c.Bytes()
	err := f.Ioctl(b)
	runtime.KeepAlive(c.keep)
	if err != nil {
		return cmdErr(op, err)
	}
	for i := range c.attrs {
		c.attrs[i] = fromBytes[Attr](b[IoctlHdrSize+i*AttrSize:])
	}
	return nil
}

// Attr returns attribute idx as it stands (after Exec: as the kernel left it).
func (c *Ioctl) Attr(idx int) Attr { return c.attrs[idx] }

// Valid reports whether the kernel set UVERBS_ATTR_F_VALID_OUTPUT on attribute idx.
func (c *Ioctl) Valid(idx int) bool { return c.attrs[idx].Flags&AttrFValidOutput != 0 }

// Obj returns the handle the kernel wrote into an OutObj attribute.
func (c *Ioctl) Obj(idx int) uint32 { return uint32(c.attrs[idx].Data) }

// FD returns the descriptor the kernel wrote into an OutFD attribute.
func (c *Ioctl) FD(idx int) int { return int(int64(c.attrs[idx].Data)) }

// String describes the call for error messages and test logs.
func (c *Ioctl) String() string {
	return fmt.Sprintf("ioctl(object %d, method %d, %d attrs)", c.hdr.Object_id, c.hdr.Method_id, len(c.attrs))
}

package uverbs

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// The server side of RDMA_VERBS_IOCTL, for an emulated kernel: it decodes the very bytes a
// File.Ioctl receives and writes results back the way drivers/infiniband/core/uverbs_ioctl.c
// does (copy_to_user through the attribute's pointer, the VALID_OUTPUT flag and new object ids
// written into the caller's attribute array).

// IoctlRequest is a decoded RDMA_VERBS_IOCTL call. Its methods read and write the caller's
// buffer and user memory; it is valid only during the File.Ioctl call that received buf.
type IoctlRequest struct {
	Hdr   IoctlHdr
	Attrs []Attr
	buf   []byte
}

// ParseIoctl decodes buf as the kernel's ib_uverbs_ioctl does: the header length must be
// within a page and equal sizeof(hdr) + num_attrs*sizeof(attr) (EINVAL otherwise), and the
// reserved header words must be zero (EPROTONOSUPPORT). A buffer too short for what the header
// claims is EFAULT, as copy_from_user would report. Errors are unix.Errno values.
func ParseIoctl(buf []byte) (*IoctlRequest, error) {
	if len(buf) < IoctlHdrSize {
		return nil, unix.EFAULT
	}
	r := &IoctlRequest{Hdr: fromBytes[IoctlHdr](buf), buf: buf}
	n := int(r.Hdr.Num_attrs)
	if r.Hdr.Length > MaxIoctlLength || int(r.Hdr.Length) != IoctlHdrSize+n*AttrSize {
		return nil, unix.EINVAL
	}
	if r.Hdr.Reserved1 != 0 || r.Hdr.Reserved2 != 0 {
		return nil, unix.EPROTONOSUPPORT
	}
	if len(buf) < int(r.Hdr.Length) {
		return nil, unix.EFAULT
	}
	r.Attrs = make([]Attr, n)
	for i := range r.Attrs {
		r.Attrs[i] = fromBytes[Attr](buf[IoctlHdrSize+i*AttrSize:])
	}
	return r, nil
}

// AttrKind is the type of an ioctl attribute in a method's schema (enum uverbs_attr_type).
type AttrKind uint8

// Attribute kinds.
const (
	AttrPtrIn   AttrKind = iota + 1 // data in, inline up to 8 bytes
	AttrPtrOut                      // data out through the pointer
	AttrIDR                         // object handle (in, or new object out)
	AttrFD                          // file descriptor (in, or new fd out)
	AttrConstIn                     // integer constant passed inline (uverbs_get_const)
)

// AttrSpec describes one attribute a method accepts, as the kernel's method definitions do.
type AttrSpec struct {
	ID        uint16
	Kind      AttrKind
	Mandatory bool
	MinLen    int // PTR_IN/PTR_OUT: shortest accepted length
	MaxLen    int // PTR_IN/PTR_OUT: longest accepted length; 0 means no limit
}

// Check applies the kernel's generic attribute rules (uverbs_set_attr, uverbs_process_attr,
// ib_uverbs_run_method) for a method with the given schema: an attribute the method does not
// know is ignored unless the caller marked it mandatory (EPROTONOSUPPORT); duplicates, a
// nonzero attr_data.reserved, a PTR length outside [MinLen, MaxLen], an IDR/FD attribute with
// a nonzero length and a missing mandatory attribute are EINVAL.
func (r *IoctlRequest) Check(specs []AttrSpec) error {
	seen := make(map[uint16]bool, len(r.Attrs))
	for _, a := range r.Attrs {
		var spec *AttrSpec
		for i := range specs {
			if specs[i].ID == a.Attr_id {
				spec = &specs[i]
				break
			}
		}
		if spec == nil {
			if a.Flags&AttrFMandatory != 0 {
				return unix.EPROTONOSUPPORT
			}
			continue
		}
		if seen[a.Attr_id] {
			return unix.EINVAL
		}
		seen[a.Attr_id] = true
		if a.Attr_data != [2]byte{} {
			return unix.EINVAL
		}
		switch spec.Kind {
		case AttrPtrIn, AttrPtrOut, AttrConstIn:
			if int(a.Len) < spec.MinLen || (spec.MaxLen > 0 && int(a.Len) > spec.MaxLen) {
				return unix.EINVAL
			}
		case AttrIDR, AttrFD:
			if a.Len != 0 {
				return unix.EINVAL
			}
		}
	}
	for _, s := range specs {
		if s.Mandatory && !seen[s.ID] {
			return unix.EINVAL
		}
	}
	return nil
}

// Find returns the index of attribute id, or -1.
func (r *IoctlRequest) Find(id uint16) int {
	for i := range r.Attrs {
		if r.Attrs[i].Attr_id == id {
			return i
		}
	}
	return -1
}

// Has reports whether attribute id is present.
func (r *IoctlRequest) Has(id uint16) bool { return r.Find(id) >= 0 }

func (r *IoctlRequest) get(id uint16) (*Attr, int, error) {
	i := r.Find(id)
	if i < 0 {
		return nil, -1, ErrAttrMissing
	}
	return &r.Attrs[i], i, nil
}

// In returns the bytes of a PTR_IN attribute: inline data when the length is at most 8,
// otherwise a copy from the user pointer (EFAULT on a bad address).
func (r *IoctlRequest) In(id uint16) ([]byte, error) {
	a, _, err := r.get(id)
	if err != nil {
		return nil, err
	}
	out := make([]byte, a.Len)
	if a.Len <= inlineMax {
		var in [8]byte
		binary.NativeEndian.PutUint64(in[:], a.Data)
		copy(out, in[:])
		return out, nil
	}
	if err := CopyFromUser(out, a.Data); err != nil {
		return nil, err
	}
	return out, nil
}

// Const returns an integer passed inline (UVERBS_ATTR_CONST_IN, u32/u64 PTR_IN): the inline
// data truncated to the attribute's length.
func (r *IoctlRequest) Const(id uint16) (uint64, error) {
	a, _, err := r.get(id)
	if err != nil {
		return 0, err
	}
	switch a.Len {
	case 1:
		return a.Data & 0xff, nil
	case 2:
		return a.Data & 0xffff, nil
	case 4:
		return a.Data & 0xffffffff, nil
	case 8:
		return a.Data, nil
	}
	return 0, unix.EINVAL
}

// Obj returns the handle in an IDR attribute.
func (r *IoctlRequest) Obj(id uint16) (uint32, error) {
	a, _, err := r.get(id)
	if err != nil {
		return 0, err
	}
	return uint32(a.Data), nil
}

// FD returns the descriptor in an FD attribute.
func (r *IoctlRequest) FD(id uint16) (int, error) {
	a, _, err := r.get(id)
	if err != nil {
		return 0, err
	}
	return int(int64(a.Data)), nil
}

// OutLen returns the capacity the caller gave a PTR_OUT attribute.
func (r *IoctlRequest) OutLen(id uint16) (int, error) {
	a, _, err := r.get(id)
	if err != nil {
		return 0, err
	}
	return int(a.Len), nil
}

// Out writes data to a PTR_OUT attribute as uverbs_copy_to does: at most the attribute's
// length is copied through its pointer, then UVERBS_ATTR_F_VALID_OUTPUT is set in the caller's
// attribute array.
func (r *IoctlRequest) Out(id uint16, data []byte) error {
	a, i, err := r.get(id)
	if err != nil {
		return err
	}
	n := min(len(data), int(a.Len))
	if err := CopyToUser(a.Data, data[:n]); err != nil {
		return err
	}
	r.setFlags(i, a.Flags|AttrFValidOutput)
	return nil
}

// OutZero is uverbs_copy_to_struct_or_zero: like Out, but the part of the caller's buffer
// beyond data is cleared.
func (r *IoctlRequest) OutZero(id uint16, data []byte) error {
	a, _, err := r.get(id)
	if err != nil {
		return err
	}
	if int(a.Len) > len(data) {
		if err := CopyToUser(a.Data+uint64(len(data)), make([]byte, int(a.Len)-len(data))); err != nil {
			return err
		}
	}
	return r.Out(id, data)
}

// SetObj writes a new object's handle into an IDR attribute of the caller's array, as the
// kernel does for UVERBS_ACCESS_NEW attributes.
func (r *IoctlRequest) SetObj(id uint16, handle uint32) error {
	_, i, err := r.get(id)
	if err != nil {
		return err
	}
	r.setData(i, uint64(handle))
	return nil
}

// SetFD writes a new descriptor into an FD attribute of the caller's array.
func (r *IoctlRequest) SetFD(id uint16, fd int) error {
	_, i, err := r.get(id)
	if err != nil {
		return err
	}
	r.setData(i, uint64(int64(fd)))
	return nil
}

// Driver returns the driver-private data of the call: the UHW_IN bytes (nil when absent) and
// the capacity of UHW_OUT (0 when absent), as uverbs_fill_udata builds the ib_udata.
func (r *IoctlRequest) Driver() (in []byte, outLen int, err error) {
	if r.Has(AttrUHWIn) {
		if in, err = r.In(AttrUHWIn); err != nil {
			return nil, 0, err
		}
	}
	if r.Has(AttrUHWOut) {
		outLen, _ = r.OutLen(AttrUHWOut)
	}
	return in, outLen, nil
}

// DriverOut writes the driver response to UHW_OUT (truncated to its capacity) and flags it
// valid, as ib_uverbs_run_method does after a handler with udata succeeds.
func (r *IoctlRequest) DriverOut(data []byte) error {
	if !r.Has(AttrUHWOut) {
		return nil
	}
	return r.Out(AttrUHWOut, data)
}

func (r *IoctlRequest) setFlags(i int, flags uint16) {
	r.Attrs[i].Flags = flags
	binary.NativeEndian.PutUint16(r.buf[IoctlHdrSize+i*AttrSize+attrFlagsOff:], flags)
}

func (r *IoctlRequest) setData(i int, v uint64) {
	r.Attrs[i].Data = v
	binary.NativeEndian.PutUint64(r.buf[IoctlHdrSize+i*AttrSize+attrDataOff:], v)
}

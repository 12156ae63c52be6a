package emu

import (
	"encoding/binary"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/uverbs"
)

// iInvokeWrite is UVERBS_METHOD_INVOKE_WRITE: a write() command carried by the ioctl path,
// which libibverbs uses for every write command once the kernel has the method
// (has_ioctl_write; Linux 5.0 on). The command's input comes in UVERBS_ATTR_CORE_IN and the
// driver's in UVERBS_ATTR_UHW_IN; its output goes to UVERBS_ATTR_CORE_OUT and
// UVERBS_ATTR_UHW_OUT instead of through the response pointer inside the command. The
// emulator rebuilds the write() command, with a response buffer of its own, runs it through
// the write path, and copies the response out.
func (f *File) iInvokeWrite(r *uverbs.IoctlRequest) error {
	cmd, err := r.Const(uverbs.AttrWriteCmd)
	if err != nil {
		return err
	}
	if cmd > 0xffffffff || uint32(cmd)&^(uverbs.CmdFlagExtended|uverbs.CmdCommandMask) != 0 {
		return fmt.Errorf("write command %#x: %w", cmd, unix.EINVAL)
	}
	optIn := func(id uint16) ([]byte, error) {
		if !r.Has(id) {
			return nil, nil
		}
		return r.In(id)
	}
	optOutLen := func(id uint16) (int, error) {
		if !r.Has(id) {
			return 0, nil
		}
		return r.OutLen(id)
	}
	coreIn, err := optIn(uverbs.AttrCoreIn)
	if err != nil {
		return err
	}
	uhwIn, err := optIn(uverbs.AttrUHWIn)
	if err != nil {
		return err
	}
	coreOut, err := optOutLen(uverbs.AttrCoreOut)
	if err != nil {
		return err
	}
	uhwOut, err := optOutLen(uverbs.AttrUHWOut)
	if err != nil {
		return err
	}
	resp := make([]byte, max(coreOut+uhwOut, 8))
	respAddr := addrOf(resp)
	var buf []byte
	if uint32(cmd)&uverbs.CmdFlagExtended != 0 {
		if len(coreIn)%8 != 0 || len(uhwIn)%8 != 0 || coreOut%8 != 0 || uhwOut%8 != 0 {
			return fmt.Errorf("extended write command %#x: sizes not in 8-byte words: %w", cmd, unix.EINVAL)
		}
		buf = make([]byte, uverbs.CmdHdrSize+uverbs.ExCmdHdrSize, uverbs.CmdHdrSize+uverbs.ExCmdHdrSize+len(coreIn)+len(uhwIn))
		putCmdHdr(buf, uint32(cmd), len(coreIn)/8, coreOut/8)
		ex := buf[uverbs.CmdHdrSize:]
		if coreOut+uhwOut > 0 {
			binary.NativeEndian.PutUint64(ex[0:], respAddr) // response
		}
		binary.NativeEndian.PutUint16(ex[8:], uint16(len(uhwIn)/8)) // provider_in_words
		binary.NativeEndian.PutUint16(ex[10:], uint16(uhwOut/8))    // provider_out_words
		buf = append(append(buf, coreIn...), uhwIn...)
	} else {
		n := uverbs.CmdHdrSize + len(coreIn) + len(uhwIn)
		if n%4 != 0 || (coreOut+uhwOut)%4 != 0 {
			return fmt.Errorf("write command %d: sizes not in 4-byte words: %w", cmd, unix.EINVAL)
		}
		buf = make([]byte, uverbs.CmdHdrSize, n)
		putCmdHdr(buf, uint32(cmd), n/4, (coreOut+uhwOut)/4)
		buf = append(append(buf, coreIn...), uhwIn...)
		// Every write command with a response starts with its response pointer.
		if coreOut+uhwOut > 0 && len(coreIn) >= 8 {
			binary.NativeEndian.PutUint64(buf[uverbs.CmdHdrSize:], respAddr)
		}
	}
	w, err := uverbs.ParseWrite(buf)
	if err != nil {
		return fmt.Errorf("write command %#x: %w", cmd, err)
	}
	if w.Extended {
		err = f.writeEx(w)
	} else {
		err = f.write(w)
	}
	runtime.KeepAlive(resp)
	if err != nil {
		return err
	}
	if coreOut > 0 {
		if err := r.Out(uverbs.AttrCoreOut, resp[:coreOut]); err != nil {
			return err
		}
	}
	if uhwOut > 0 {
		return r.Out(uverbs.AttrUHWOut, resp[coreOut:coreOut+uhwOut])
	}
	return nil
}

// putCmdHdr writes struct ib_uverbs_cmd_hdr {command, in_words, out_words}.
func putCmdHdr(b []byte, cmd uint32, in, out int) {
	binary.NativeEndian.PutUint32(b[0:], cmd)
	binary.NativeEndian.PutUint16(b[4:], uint16(in))
	binary.NativeEndian.PutUint16(b[6:], uint16(out))
}

package uverbs

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// WriteRequest is a decoded write() command, for an emulated kernel. It mirrors
// ib_uverbs_write and verify_hdr in drivers/infiniband/core/uverbs_main.c.
type WriteRequest struct {
	Hdr      CmdHdr
	ExHdr    ExCmdHdr // zero for legacy commands
	Command  uint32   // command number without the extended flag
	Extended bool
	// Payload is everything after the header(s): the core command struct followed by the
	// driver data.
	Payload []byte
	// Response is the user address the response goes to: the ex header's field, or the first
	// u64 of the command struct for legacy commands (meaningful only for commands that have a
	// response).
	Response uint64
	// OutLen is the response capacity in bytes: out_words*4 (legacy) or
	// (out_words+provider_out_words)*8 (extended).
	OutLen int
	// For extended commands the header splits core and driver parts explicitly.
	CoreInLen, DriverInLen, CoreOutLen, DriverOutLen int
}

// ParseWrite decodes the generic part of a write() buffer: count below the header size,
// unknown flag bits or a legacy in_words that disagrees with the byte count are EINVAL, as are
// the extended-header inconsistencies ib_uverbs_write rejects (word counts versus count,
// nonzero cmd_hdr_reserved, a response pointer without response words or the reverse).
func ParseWrite(buf []byte) (*WriteRequest, error) {
	if len(buf) < CmdHdrSize {
		return nil, unix.EINVAL
	}
	w := &WriteRequest{Hdr: fromBytes[CmdHdr](buf)}
	if w.Hdr.Command&^(CmdFlagExtended|CmdCommandMask) != 0 {
		return nil, unix.EINVAL
	}
	w.Command = w.Hdr.Command & CmdCommandMask
	w.Extended = w.Hdr.Command&CmdFlagExtended != 0
	if !w.Extended {
		if int(w.Hdr.In_words)*4 != len(buf) {
			return nil, unix.EINVAL
		}
		w.Payload = buf[CmdHdrSize:]
		w.OutLen = int(w.Hdr.Out_words) * 4
		if len(w.Payload) >= 8 {
			w.Response = binary.NativeEndian.Uint64(w.Payload)
		}
		return w, nil
	}
	if len(buf) < CmdHdrSize+ExCmdHdrSize {
		return nil, unix.EINVAL
	}
	w.ExHdr = fromBytes[ExCmdHdr](buf[CmdHdrSize:])
	w.Payload = buf[CmdHdrSize+ExCmdHdrSize:]
	w.CoreInLen = int(w.Hdr.In_words) * 8
	w.DriverInLen = int(w.ExHdr.Provider_in_words) * 8
	w.CoreOutLen = int(w.Hdr.Out_words) * 8
	w.DriverOutLen = int(w.ExHdr.Provider_out_words) * 8
	if w.CoreInLen+w.DriverInLen != len(w.Payload) {
		return nil, unix.EINVAL
	}
	if w.ExHdr.Cmd_hdr_reserved != 0 {
		return nil, unix.EINVAL
	}
	if w.ExHdr.Response != 0 {
		if w.CoreOutLen == 0 && w.DriverOutLen == 0 {
			return nil, unix.EINVAL
		}
	} else if w.CoreOutLen != 0 || w.DriverOutLen != 0 {
		return nil, unix.EINVAL
	}
	w.Response = w.ExHdr.Response
	w.OutLen = w.CoreOutLen + w.DriverOutLen
	return w, nil
}

// CheckSizes applies verify_hdr's per-method checks given the sizes of the method's core
// request and response structs: a request or response capacity smaller than the core struct is
// ENOSPC. For legacy commands it also fixes the core/driver split (driver data is whatever
// follows the core struct, in both directions).
func (w *WriteRequest) CheckSizes(reqSize, respSize int) error {
	if w.Extended {
		if w.CoreInLen < reqSize {
			return unix.ENOSPC
		}
		if w.Response != 0 && w.CoreOutLen < respSize {
			return unix.ENOSPC
		}
		return nil
	}
	if len(w.Payload) < reqSize {
		return unix.ENOSPC
	}
	if w.OutLen < respSize {
		return unix.ENOSPC
	}
	w.CoreInLen, w.DriverInLen = reqSize, len(w.Payload)-reqSize
	w.CoreOutLen, w.DriverOutLen = respSize, w.OutLen-respSize
	return nil
}

// Core returns the core command bytes (after CheckSizes for legacy commands).
func (w *WriteRequest) Core() []byte { return w.Payload[:w.CoreInLen] }

// DriverIn returns the driver request bytes (the ib_udata inbuf).
func (w *WriteRequest) DriverIn() []byte { return w.Payload[w.CoreInLen : w.CoreInLen+w.DriverInLen] }

// Respond writes the core response as uverbs_response does: at most CoreOutLen bytes through
// the response pointer, and zeros over the rest of the caller's core response space.
func (w *WriteRequest) Respond(core []byte) error {
	n := min(len(core), w.CoreOutLen)
	if err := CopyToUser(w.Response, core[:n]); err != nil {
		return err
	}
	if n < w.CoreOutLen {
		return CopyToUser(w.Response+uint64(n), make([]byte, w.CoreOutLen-n))
	}
	return nil
}

// RespondDriver writes the driver response (ib_copy_to_udata) right after the core response
// space, truncated to DriverOutLen.
func (w *WriteRequest) RespondDriver(data []byte) error {
	n := min(len(data), w.DriverOutLen)
	return CopyToUser(w.Response+uint64(w.CoreOutLen), data[:n])
}

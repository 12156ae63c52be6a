package uverbs

import (
	"encoding/binary"
	"fmt"
	"runtime"
)

// The legacy write() command path, client side, marshalled as rdma-core's
// libibverbs/cmd_fallback.c (_execute_cmd_write, _execute_cmd_write_ex) does.

// Write sends legacy command number cmd: struct ib_uverbs_cmd_hdr, then core (the command
// struct, e.g. the bytes of an ib_uverbs_reg_mr), then driverIn. When resp or driverOut is
// non-empty the kernel writes its response to one buffer holding the core response followed
// by the driver response; its address goes into the command's first u64 (the `response`
// field every such command struct starts with), and the two parts are copied back into resp
// and driverOut. in_words and out_words count 4-byte words of the whole request and of the
// whole response, as the kernel expects; a length that is not a multiple of 4 is passed on
// as is, so the kernel can reject it.
func Write(f File, cmd uint32, core, driverIn, resp, driverOut []byte) error {
	op := "write " + cmdName(cmd, false)
	req := make([]byte, CmdHdrSize+len(core)+len(driverIn))
	out := responseBuffer(resp, driverOut)
	h := CmdHdr{Command: cmd, In_words: uint16(len(req) / 4), Out_words: uint16(len(out) / 4)}
	copy(req, structBytes(&h))
	copy(req[CmdHdrSize:], core)
	copy(req[CmdHdrSize+len(core):], driverIn)
	if out != nil {
		if len(core) < 8 {
			return fmt.Errorf("uverbs: %s: command has no response field: %w", op, ErrMalformed)
		}
		binary.NativeEndian.PutUint64(req[CmdHdrSize:], Addr(out))
	}
	return send(f, op, req, out, resp, driverOut)
}

// WriteEx sends extended command number cmd (without the flag; it is added here):
// struct ib_uverbs_cmd_hdr and struct ib_uverbs_ex_cmd_hdr, then core and driverIn. The
// header counts 8-byte words: in_words/out_words for the core request and response,
// provider_in_words/provider_out_words for the driver parts; the response pointer lives in
// the extended header. Lengths that are not multiples of 8 are passed on for the kernel to
// reject.
func WriteEx(f File, cmd uint32, core, driverIn, resp, driverOut []byte) error {
	op := "write " + cmdName(cmd, true)
	req := make([]byte, CmdHdrSize+ExCmdHdrSize+len(core)+len(driverIn))
	out := responseBuffer(resp, driverOut)
	h := CmdHdr{
		Command:   CmdFlagExtended | cmd,
		In_words:  uint16(len(core) / 8),
		Out_words: uint16(len(resp) / 8),
	}
	ex := ExCmdHdr{
		Response:           Addr(out),
		Provider_in_words:  uint16(len(driverIn) / 8),
		Provider_out_words: uint16(len(driverOut) / 8),
	}
	copy(req, structBytes(&h))
	copy(req[CmdHdrSize:], structBytes(&ex))
	copy(req[CmdHdrSize+ExCmdHdrSize:], core)
	copy(req[CmdHdrSize+ExCmdHdrSize+len(core):], driverIn)
	return send(f, op, req, out, resp, driverOut)
}

// responseBuffer returns the one buffer the kernel writes the core and driver responses to,
// nil when neither is wanted.
func responseBuffer(resp, driverOut []byte) []byte {
	if n := len(resp) + len(driverOut); n > 0 {
		return make([]byte, n)
	}
	return nil
}

// send writes req, whose header points the kernel at out, and splits out into resp and
// driverOut. out stays alive until the write returns: the kernel fills it through the
// address in req, which the garbage collector does not see.
func send(f File, op string, req, out, resp, driverOut []byte) error {
	err := f.Write(req)
	runtime.KeepAlive(out)
	if err != nil {
		return cmdErr(op, err)
	}
	copy(resp, out)
	if len(out) > len(resp) {
		copy(driverOut, out[len(resp):])
	}
	return nil
}

var cmdNames = map[uint32]string{
	CmdGetContext: "GET_CONTEXT", CmdQueryDevice: "QUERY_DEVICE", CmdQueryPort: "QUERY_PORT",
	CmdAllocPD: "ALLOC_PD", CmdDeallocPD: "DEALLOC_PD", CmdRegMR: "REG_MR", CmdDeregMR: "DEREG_MR",
	CmdCreateCompChannel: "CREATE_COMP_CHANNEL", CmdCreateCQ: "CREATE_CQ", CmdDestroyCQ: "DESTROY_CQ",
	CmdCreateQP: "CREATE_QP", CmdQueryQP: "QUERY_QP", CmdModifyQP: "MODIFY_QP", CmdDestroyQP: "DESTROY_QP",
	CmdReqNotifyCQ: "REQ_NOTIFY_CQ", CmdPollCQ: "POLL_CQ", CmdCreateAH: "CREATE_AH", CmdDestroyAH: "DESTROY_AH",
	CmdReregMR: "REREG_MR", CmdAllocMW: "ALLOC_MW", CmdDeallocMW: "DEALLOC_MW", CmdResizeCQ: "RESIZE_CQ",
	CmdCreateSRQ: "CREATE_SRQ", CmdDestroySRQ: "DESTROY_SRQ", CmdOpenQP: "OPEN_QP",
}

// cmdName names a write command as the uapi enum does, for error messages.
func cmdName(cmd uint32, ex bool) string {
	cmd &^= CmdFlagExtended
	n, ok := cmdNames[cmd]
	if !ok {
		n = fmt.Sprintf("CMD_%d", cmd)
	}
	if ex {
		return "EX_" + n
	}
	return n
}

package mlx5

import "encoding/binary"

// CQE64Size is sizeof(struct mlx5_cqe64). With 128-byte CQEs the CQE64 is the second half of
// each entry.
const CQE64Size = 64

// Byte offsets inside struct mlx5_cqe64 and struct mlx5_err_cqe (infiniband/mlx5dv.h).
const (
	cqeOffWQEID        = 2  // __be16 wqe_id
	cqeOffMLPath       = 17 // u8 ml_path
	cqeOffSLID         = 22 // __be16 slid
	cqeOffFlagsRQPN    = 24 // __be32 flags_rqpn
	cqeOffSRQNUIdx     = 32 // __be32 srqn_uidx (srqn in mlx5_err_cqe)
	cqeOffImmInvalPKey = 36 // __be32 imm_inval_pkey
	cqeOffByteCnt      = 44 // __be32 byte_cnt
	cqeOffTimestamp    = 48 // __be64 timestamp
	cqeOffSopDropQPN   = 56 // __be32 sop_drop_qpn (s_wqe_opcode_qpn in mlx5_err_cqe)
	cqeOffWQECounter   = 60 // __be16 wqe_counter
	cqeOffSignature    = 62 // u8 signature
	cqeOffOpOwn        = 63 // u8 op_own
	errOffVendorSynd   = 54 // mlx5_err_cqe: vendor_err_synd
	errOffSyndrome     = 55 // mlx5_err_cqe: syndrome
)

// CQE64 is struct mlx5_cqe64 with the fields of struct mlx5_err_cqe that overlay it (both in
// infiniband/mlx5dv.h). The error fields share bytes with Timestamp: Put writes Syndrome and
// VendorSyndrome for error opcodes and Timestamp for the others, and Decode fills the same
// set, so a decode/encode round trip is exact for canonical CQEs. The srqn of an error CQE is
// SRQNUIdx (same bytes).
type CQE64 struct {
	WQEID        uint16 // striding RQ / tag matching; zero for RC
	MLPath       uint8  // ml_path: DLID path bits in the low 7 bits
	SLID         uint16 // source LID (IB); zero on RoCE
	FlagsRQPN    uint32 // bits 29:28 GRH/L3 in CQE, 27:24 SL, 23:0 source QPN
	SRQNUIdx     uint32 // srqn_uidx: with CQE version 1 the user index of the QP
	ImmInvalPKey uint32 // immediate (big-endian value), invalidated rkey, or pkey index
	ByteCnt      uint32 // bytes received (responder) or read (RDMA READ requester)
	Timestamp    uint64 // not valid in error CQEs
	SopDropQPN   uint32 // bits 31:24 send opcode (requester), 23:0 QPN
	WQECounter   uint16 // index of the WQE that completed
	Signature    uint8
	OpOwn        uint8 // opcode<<4 | format<<2 | se<<1 | owner

	// Error CQE fields (valid when Opcode() is CQEReqErr or CQERespErr).
	VendorSyndrome uint8
	Syndrome       uint8
}

// Opcode is the CQE opcode (op_own >> 4), one of the CQE* constants.
func (c *CQE64) Opcode() uint8 { return c.OpOwn >> 4 }

// Owner is the ownership bit (op_own & 1).
func (c *CQE64) Owner() uint8 { return c.OpOwn & CQEOwnerMask }

// SolicitedEvent is the se bit of op_own.
func (c *CQE64) SolicitedEvent() bool { return c.OpOwn&2 != 0 }

// Format is the CQE format field ((op_own >> 2) & 3); 3 means a compressed CQE block.
func (c *CQE64) Format() uint8 { return (c.OpOwn >> 2) & 3 }

// IsError reports whether this is a requester or responder error CQE.
func (c *CQE64) IsError() bool { op := c.Opcode(); return op == CQEReqErr || op == CQERespErr }

// QPN is the local QP number (sop_drop_qpn & 0xffffff).
func (c *CQE64) QPN() uint32 { return c.SopDropQPN & qpnMask }

// SendOpcode is the opcode of the send WQE a requester CQE completes (sop_drop_qpn >> 24).
func (c *CQE64) SendOpcode() Opcode { return Opcode(c.SopDropQPN >> 24) }

// SrcQP is the remote QP number of a responder CQE (flags_rqpn & 0xffffff).
func (c *CQE64) SrcQP() uint32 { return c.FlagsRQPN & qpnMask }

// SL is the service level of a responder CQE.
func (c *CQE64) SL() uint8 { return uint8(c.FlagsRQPN>>24) & 0xf }

// GRH reports whether the received packet carried a GRH (RoCE always does).
func (c *CQE64) GRH() bool { return (c.FlagsRQPN>>28)&3 != 0 }

// SetOpOwn sets op_own from its parts.
func (c *CQE64) SetOpOwn(opcode uint8, solicited bool, owner uint8) {
	c.OpOwn = opcode<<4 | owner&CQEOwnerMask
	if solicited {
		c.OpOwn |= 2
	}
}

// Put writes c as 64 bytes into b[0:64]; reserved bytes are zeroed.
func (c *CQE64) Put(b []byte) {
	_ = b[63]
	clear(b[:64])
	binary.BigEndian.PutUint16(b[cqeOffWQEID:], c.WQEID)
	b[cqeOffMLPath] = c.MLPath
	binary.BigEndian.PutUint16(b[cqeOffSLID:], c.SLID)
	binary.BigEndian.PutUint32(b[cqeOffFlagsRQPN:], c.FlagsRQPN)
	binary.BigEndian.PutUint32(b[cqeOffSRQNUIdx:], c.SRQNUIdx)
	binary.BigEndian.PutUint32(b[cqeOffImmInvalPKey:], c.ImmInvalPKey)
	binary.BigEndian.PutUint32(b[cqeOffByteCnt:], c.ByteCnt)
	if c.IsError() {
		b[errOffVendorSynd] = c.VendorSyndrome
		b[errOffSyndrome] = c.Syndrome
	} else {
		binary.BigEndian.PutUint64(b[cqeOffTimestamp:], c.Timestamp)
	}
	binary.BigEndian.PutUint32(b[cqeOffSopDropQPN:], c.SopDropQPN)
	binary.BigEndian.PutUint16(b[cqeOffWQECounter:], c.WQECounter)
	b[cqeOffSignature] = c.Signature
	b[cqeOffOpOwn] = c.OpOwn
}

// DecodeCQE64 parses 64 bytes of CQE. It accepts any bytes: the opcode decides whether the
// error fields or the timestamp are read, nothing else is validated.
func DecodeCQE64(b []byte) (CQE64, error) {
	var c CQE64
	if len(b) < CQE64Size {
		return c, shortErr("decode cqe64", len(b), CQE64Size)
	}
	c.decode(b)
	return c, nil
}

func (c *CQE64) decode(b []byte) {
	_ = b[63]
	c.WQEID = binary.BigEndian.Uint16(b[cqeOffWQEID:])
	c.MLPath = b[cqeOffMLPath]
	c.SLID = binary.BigEndian.Uint16(b[cqeOffSLID:])
	c.FlagsRQPN = binary.BigEndian.Uint32(b[cqeOffFlagsRQPN:])
	c.SRQNUIdx = binary.BigEndian.Uint32(b[cqeOffSRQNUIdx:])
	c.ImmInvalPKey = binary.BigEndian.Uint32(b[cqeOffImmInvalPKey:])
	c.ByteCnt = binary.BigEndian.Uint32(b[cqeOffByteCnt:])
	c.SopDropQPN = binary.BigEndian.Uint32(b[cqeOffSopDropQPN:])
	c.WQECounter = binary.BigEndian.Uint16(b[cqeOffWQECounter:])
	c.Signature = b[cqeOffSignature]
	c.OpOwn = b[cqeOffOpOwn]
	if c.IsError() {
		c.Timestamp = 0
		c.VendorSyndrome = b[errOffVendorSynd]
		c.Syndrome = b[errOffSyndrome]
	} else {
		c.Timestamp = binary.BigEndian.Uint64(b[cqeOffTimestamp:])
		c.VendorSyndrome, c.Syndrome = 0, 0
	}
}

// WC is the provider-independent content of a work completion that a CQE carries; the
// provider adds wr_id from its own per-WQE table (indexed by WQECounter).
type WC struct {
	Status    WCStatus
	Opcode    WCOpcode
	Flags     WCFlags
	ByteLen   uint32
	Imm       uint32 // immediate (big-endian value) or invalidated rkey, per Flags
	QPN       uint32
	SrcQP     uint32
	SL        uint8
	SLID      uint16
	PKeyIndex uint16
	// DLIDPathBits is ml_path & 0x7f.
	DLIDPathBits uint8
	VendorErr    uint8
	WQECounter   uint16
	// Receive is true for responder CQEs (and RESP_ERR), which consume receive WQEs.
	Receive bool
	// OpcodeKnown is false when the opcode must come from the provider's per-WQE table
	// (NOP and driver opcodes) or the CQE opcode is not one a QP completion uses.
	OpcodeKnown bool
}

// Completion interprets the CQE the way mlx5_parse_cqe (providers/mlx5/cq.c) fills struct
// ibv_wc for an RC QP without SRQ: status and vendor error from error CQEs, opcode, flags and
// byte_len from requester or responder CQEs. Error completions report only status, vendor
// error, QPN and the WQE counter, as rdma-core does.
func (c *CQE64) Completion() WC {
	w := WC{QPN: c.QPN(), WQECounter: c.WQECounter}
	switch op := c.Opcode(); op {
	case CQEReq:
		opc, fl, lf, ok := RequesterOpcode(c.SendOpcode())
		w.Opcode, w.Flags, w.OpcodeKnown = opc, fl, ok
		switch lf {
		case ReqLenByteCnt:
			w.ByteLen = c.ByteCnt
		case ReqLenAtomic:
			w.ByteLen = AtomicSize
		}
	case CQERespWrImm, CQERespSend, CQERespSendImm, CQERespSendInv:
		opc, fl, _ := ResponderOpcode(op)
		w.Opcode, w.Flags, w.OpcodeKnown, w.Receive = opc, fl, true, true
		w.ByteLen = c.ByteCnt
		if fl&(WCFlagWithImm|WCFlagWithInv) != 0 {
			w.Imm = c.ImmInvalPKey
		}
		w.SLID = c.SLID
		w.SL = c.SL()
		w.SrcQP = c.SrcQP()
		w.DLIDPathBits = c.MLPath & 0x7f
		if c.GRH() {
			w.Flags |= WCFlagGRH
		}
		w.PKeyIndex = uint16(c.ImmInvalPKey)
	case CQEReqErr, CQERespErr:
		w.Status = StatusFromSyndrome(c.Syndrome)
		w.VendorErr = c.VendorSyndrome
		w.Receive = op == CQERespErr
	default:
		w.Status = WCGeneralErr
	}
	return w
}

//go:build cgo

// Package dvoracle produces reference bytes for package mlx5's tests from C: the static
// inline encoders and structs of NVIDIA's <infiniband/mlx5dv.h> (libibverbs-dev) and the uapi
// header <rdma/mlx5-abi.h> (linux-libc-dev). It is test support only; nothing in the data path
// imports it. Without cgo or without the headers, DVAvailable/ABIAvailable report false and
// the tests that need them skip.
package dvoracle

// #include "oracle.h"
import "C"

// DVAvailable reports whether the mlx5dv.h oracle was compiled in.
func DVAvailable() bool { return C.dvo_dv_available() != 0 }

// ABIAvailable reports whether the mlx5-abi.h oracle was compiled in.
func ABIAvailable() bool { return C.dvo_abi_available() != 0 }

func b16(r C.dvo_bytes16) (o [16]byte) {
	for i := range o {
		o[i] = byte(r.b[i])
	}
	return o
}

func b128(r C.dvo_bytes128) (o [128]byte) {
	for i := range o {
		o[i] = byte(r.b[i])
	}
	return o
}

func b64(r C.dvo_bytes64) (o [64]byte) {
	for i := range o {
		o[i] = byte(r.b[i])
	}
	return o
}

// CtrlSeg encodes with mlx5dv_set_ctrl_seg; imm is passed to it big-endian (htobe32), as the
// header's contract for immediate data requires.
func CtrlSeg(pi uint16, opcode, opmod uint8, qpn uint32, fmCESE, ds, signature uint8, imm uint32) [16]byte {
	return b16(C.dvo_ctrl_seg(C.uint16_t(pi), C.uint8_t(opcode), C.uint8_t(opmod), C.uint32_t(qpn),
		C.uint8_t(fmCESE), C.uint8_t(ds), C.uint8_t(signature), C.uint32_t(imm)))
}

// DataSeg encodes with mlx5dv_set_data_seg.
func DataSeg(length, lkey uint32, addr uint64) [16]byte {
	return b16(C.dvo_data_seg(C.uint32_t(length), C.uint32_t(lkey), C.uint64_t(addr)))
}

// RaddrSeg fills struct mlx5_wqe_raddr_seg with htobe*.
func RaddrSeg(raddr uint64, rkey uint32) [16]byte {
	return b16(C.dvo_raddr_seg(C.uint64_t(raddr), C.uint32_t(rkey)))
}

// AtomicSeg fills struct mlx5_wqe_atomic_seg with htobe64.
func AtomicSeg(swapAdd, compare uint64) [16]byte {
	return b16(C.dvo_atomic_seg(C.uint64_t(swapAdd), C.uint64_t(compare)))
}

// InlineHdr fills struct mlx5_wqe_inl_data_seg for n bytes (first 4 bytes of the result).
func InlineHdr(n uint32) [4]byte {
	b := b16(C.dvo_inline_hdr(C.uint32_t(n)))
	return [4]byte(b[:4])
}

// CQE64 builds a struct mlx5_cqe64 in C.
func CQE64(f CQE) [64]byte {
	c := C.dvo_cqe{
		wqe_id: C.uint16_t(f.WQEID), ml_path: C.uint8_t(f.MLPath), slid: C.uint16_t(f.SLID),
		flags_rqpn: C.uint32_t(f.FlagsRQPN), srqn_uidx: C.uint32_t(f.SRQNUIdx),
		imm_inval_pkey: C.uint32_t(f.ImmInvalPKey), byte_cnt: C.uint32_t(f.ByteCnt),
		timestamp: C.uint64_t(f.Timestamp), sop_drop_qpn: C.uint32_t(f.SopDropQPN),
		wqe_counter: C.uint16_t(f.WQECounter), signature: C.uint8_t(f.Signature), op_own: C.uint8_t(f.OpOwn),
	}
	return b64(C.dvo_cqe64(&c))
}

// ErrCQE64 builds a struct mlx5_err_cqe in C.
func ErrCQE64(f ErrCQE) [64]byte {
	c := C.dvo_err_cqe{
		srqn: C.uint32_t(f.SRQN), vendor_err_synd: C.uint8_t(f.VendorErrSynd), syndrome: C.uint8_t(f.Syndrome),
		s_wqe_opcode_qpn: C.uint32_t(f.SWQEOpcodeQPN), wqe_counter: C.uint16_t(f.WQECounter),
		signature: C.uint8_t(f.Signature), op_own: C.uint8_t(f.OpOwn),
	}
	return b64(C.dvo_err_cqe64(&c))
}

// CQEGetters applies mlx5dv_get_cqe_owner/se/format/opcode to b.
func CQEGetters(b [64]byte) (owner, se, format, opcode uint8) {
	var in C.dvo_bytes64
	for i := range b {
		in.b[i] = C.uchar(b[i])
	}
	g := C.dvo_cqe_getters(in)
	return uint8(g.owner), uint8(g.se), uint8(g.format), uint8(g.opcode)
}

// Fields lists the layouts of every struct the mlx5 package encodes.
func Fields() []Field {
	var out []Field
	for i := 0; i < int(C.dvo_dv_nfields()); i++ {
		out = append(out, field(C.dvo_dv_field(C.int(i))))
	}
	for i := 0; i < int(C.dvo_abi_nfields()); i++ {
		out = append(out, field(C.dvo_abi_field(C.int(i))))
	}
	return out
}

func field(f C.dvo_field) Field {
	return Field{Struct: C.GoString(f.strct), Name: C.GoString(f.name), Off: int(f.off), Size: int(f.size)}
}

// Consts lists the header constants the mlx5 package mirrors.
func Consts() []Const {
	var out []Const
	for i := 0; i < int(C.dvo_dv_nconsts()); i++ {
		c := C.dvo_dv_const(C.int(i))
		out = append(out, Const{Name: C.GoString(c.name), Value: int64(c.value)})
	}
	for i := 0; i < int(C.dvo_abi_nconsts()); i++ {
		c := C.dvo_abi_const(C.int(i))
		out = append(out, Const{Name: C.GoString(c.name), Value: int64(c.value)})
	}
	return out
}

// AllocUcontextReqV2 fills struct mlx5_ib_alloc_ucontext_req_v2 (32 bytes).
func AllocUcontextReqV2(total, lowLat, flags, compMask uint32, maxCQEVersion uint8, libCaps uint64) []byte {
	b := b128(C.dvo_alloc_ucontext_req_v2(C.uint32_t(total), C.uint32_t(lowLat), C.uint32_t(flags),
		C.uint32_t(compMask), C.uint8_t(maxCQEVersion), C.uint64_t(libCaps)))
	return b[:32]
}

// AllocUcontextResp fills struct mlx5_ib_alloc_ucontext_resp (72 bytes) from its 22 fields in
// declaration order (each truncated by C to the field's width).
func AllocUcontextResp(v [22]uint64) []byte {
	var cv [22]C.uint64_t
	for i := range v {
		cv[i] = C.uint64_t(v[i])
	}
	b := b128(C.dvo_alloc_ucontext_resp(&cv[0]))
	return b[:72]
}

// CreateCQ fills struct mlx5_ib_create_cq (32 bytes).
func CreateCQ(buf, db uint64, cqeSize uint32, compEn, compFmt uint8, flags, uarPage uint16) []byte {
	b := b128(C.dvo_create_cq(C.uint64_t(buf), C.uint64_t(db), C.uint32_t(cqeSize), C.uint8_t(compEn),
		C.uint8_t(compFmt), C.uint16_t(flags), C.uint16_t(uarPage)))
	return b[:32]
}

// CreateCQResp fills struct mlx5_ib_create_cq_resp (8 bytes).
func CreateCQResp(cqn uint32) []byte {
	b := b128(C.dvo_create_cq_resp(C.uint32_t(cqn)))
	return b[:8]
}

// CreateQP fills struct mlx5_ib_create_qp (56 bytes).
func CreateQP(buf, db uint64, sqCnt, rqCnt, rqShift, flags, uidx, bfreg uint32, sqBuf uint64, ece uint32, logConc, logErr uint8) []byte {
	b := b128(C.dvo_create_qp(C.uint64_t(buf), C.uint64_t(db), C.uint32_t(sqCnt), C.uint32_t(rqCnt),
		C.uint32_t(rqShift), C.uint32_t(flags), C.uint32_t(uidx), C.uint32_t(bfreg), C.uint64_t(sqBuf),
		C.uint32_t(ece), C.uint8_t(logConc), C.uint8_t(logErr)))
	return b[:56]
}

// CreateQPResp fills struct mlx5_ib_create_qp_resp (40 bytes).
func CreateQPResp(bfreg, ece, compMask, tirn, tisn, rqn, sqn uint32, tirICM uint64) []byte {
	b := b128(C.dvo_create_qp_resp(C.uint32_t(bfreg), C.uint32_t(ece), C.uint32_t(compMask), C.uint32_t(tirn),
		C.uint32_t(tisn), C.uint32_t(rqn), C.uint32_t(sqn), C.uint64_t(tirICM)))
	return b[:40]
}

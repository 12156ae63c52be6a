// The PRM side of the oracle: every byte here is produced by NVIDIA's own header
// <infiniband/mlx5dv.h> (static inline encoders where they exist, the header's structs filled
// with htobe* where they do not), so the Go encoders are compared with an independent source.
#include <stddef.h>
#include <string.h>
#include <endian.h>
#include "oracle.h"

#if defined(__has_include)
#if __has_include(<infiniband/mlx5dv.h>) && __has_include(<infiniband/verbs.h>)
#define DVO_HAVE_DV 1
#endif
#endif

#ifdef DVO_HAVE_DV
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

int dvo_dv_available(void) { return 1; }

dvo_bytes16 dvo_ctrl_seg(uint16_t pi, uint8_t opcode, uint8_t opmod, uint32_t qpn,
			 uint8_t fm_ce_se, uint8_t ds, uint8_t signature, uint32_t imm)
{
	dvo_bytes16 out;
	struct mlx5_wqe_ctrl_seg seg;

	memset(&seg, 0, sizeof(seg));
	/* The header's contract: imm is stored as given, the caller passes it big-endian. */
	mlx5dv_set_ctrl_seg(&seg, pi, opcode, opmod, qpn, fm_ce_se, ds, signature, htobe32(imm));
	memcpy(out.b, &seg, sizeof(seg));
	return out;
}

dvo_bytes16 dvo_data_seg(uint32_t length, uint32_t lkey, uint64_t addr)
{
	dvo_bytes16 out;
	struct mlx5_wqe_data_seg seg;

	mlx5dv_set_data_seg(&seg, length, lkey, (uintptr_t)addr);
	memcpy(out.b, &seg, sizeof(seg));
	return out;
}

dvo_bytes16 dvo_raddr_seg(uint64_t raddr, uint32_t rkey)
{
	dvo_bytes16 out;
	struct mlx5_wqe_raddr_seg seg;

	memset(&seg, 0xa5, sizeof(seg)); /* reserved must end up zero */
	seg.raddr = htobe64(raddr);
	seg.rkey = htobe32(rkey);
	seg.reserved = 0;
	memcpy(out.b, &seg, sizeof(seg));
	return out;
}

dvo_bytes16 dvo_atomic_seg(uint64_t swap_add, uint64_t compare)
{
	dvo_bytes16 out;
	struct mlx5_wqe_atomic_seg seg;

	seg.swap_add = htobe64(swap_add);
	seg.compare = htobe64(compare);
	memcpy(out.b, &seg, sizeof(seg));
	return out;
}

dvo_bytes16 dvo_inline_hdr(uint32_t n)
{
	dvo_bytes16 out;
	struct mlx5_wqe_inl_data_seg seg;

	memset(&out, 0, sizeof(out));
	seg.byte_count = htobe32(n | MLX5_INLINE_SEG);
	memcpy(out.b, &seg, sizeof(seg));
	return out;
}

dvo_bytes64 dvo_cqe64(const dvo_cqe *f)
{
	dvo_bytes64 out;
	struct mlx5_cqe64 c;

	memset(&c, 0, sizeof(c));
	c.wqe_id = htobe16(f->wqe_id);
	c.ml_path = f->ml_path;
	c.slid = htobe16(f->slid);
	c.flags_rqpn = htobe32(f->flags_rqpn);
	c.srqn_uidx = htobe32(f->srqn_uidx);
	c.imm_inval_pkey = htobe32(f->imm_inval_pkey);
	c.byte_cnt = htobe32(f->byte_cnt);
	c.timestamp = htobe64(f->timestamp);
	c.sop_drop_qpn = htobe32(f->sop_drop_qpn);
	c.wqe_counter = htobe16(f->wqe_counter);
	c.signature = f->signature;
	c.op_own = f->op_own;
	memcpy(out.b, &c, sizeof(c));
	return out;
}

dvo_bytes64 dvo_err_cqe64(const dvo_err_cqe *f)
{
	dvo_bytes64 out;
	struct mlx5_err_cqe c;

	memset(&c, 0, sizeof(c));
	c.srqn = htobe32(f->srqn);
	c.vendor_err_synd = f->vendor_err_synd;
	c.syndrome = f->syndrome;
	c.s_wqe_opcode_qpn = htobe32(f->s_wqe_opcode_qpn);
	c.wqe_counter = htobe16(f->wqe_counter);
	c.signature = f->signature;
	c.op_own = f->op_own;
	memcpy(out.b, &c, sizeof(c));
	return out;
}

dvo_getters dvo_cqe_getters(dvo_bytes64 b)
{
	dvo_getters g;
	struct mlx5_cqe64 c;

	memcpy(&c, b.b, sizeof(c));
	g.owner = mlx5dv_get_cqe_owner(&c);
	g.se = mlx5dv_get_cqe_se(&c);
	g.format = mlx5dv_get_cqe_format(&c);
	g.opcode = mlx5dv_get_cqe_opcode(&c);
	return g;
}

#define F(s, f) { #s, #f, (long)offsetof(struct s, f), (long)sizeof(((struct s *)0)->f) }
#define S(s) { #s, "", 0, (long)sizeof(struct s) }

static const dvo_field dv_fields[] = {
	S(mlx5_wqe_ctrl_seg),
	F(mlx5_wqe_ctrl_seg, opmod_idx_opcode),
	F(mlx5_wqe_ctrl_seg, qpn_ds),
	F(mlx5_wqe_ctrl_seg, signature),
	F(mlx5_wqe_ctrl_seg, dci_stream_channel_id),
	F(mlx5_wqe_ctrl_seg, fm_ce_se),
	F(mlx5_wqe_ctrl_seg, imm),
	S(mlx5_wqe_raddr_seg),
	F(mlx5_wqe_raddr_seg, raddr),
	F(mlx5_wqe_raddr_seg, rkey),
	F(mlx5_wqe_raddr_seg, reserved),
	S(mlx5_wqe_atomic_seg),
	F(mlx5_wqe_atomic_seg, swap_add),
	F(mlx5_wqe_atomic_seg, compare),
	S(mlx5_wqe_data_seg),
	F(mlx5_wqe_data_seg, byte_count),
	F(mlx5_wqe_data_seg, lkey),
	F(mlx5_wqe_data_seg, addr),
	S(mlx5_wqe_inl_data_seg),
	F(mlx5_wqe_inl_data_seg, byte_count),
	S(mlx5_cqe64),
	F(mlx5_cqe64, wqe_id),
	F(mlx5_cqe64, ml_path),
	F(mlx5_cqe64, slid),
	F(mlx5_cqe64, flags_rqpn),
	F(mlx5_cqe64, srqn_uidx),
	F(mlx5_cqe64, imm_inval_pkey),
	F(mlx5_cqe64, byte_cnt),
	F(mlx5_cqe64, timestamp),
	F(mlx5_cqe64, sop_drop_qpn),
	F(mlx5_cqe64, wqe_counter),
	F(mlx5_cqe64, signature),
	F(mlx5_cqe64, op_own),
	S(mlx5_err_cqe),
	F(mlx5_err_cqe, srqn),
	F(mlx5_err_cqe, vendor_err_synd),
	F(mlx5_err_cqe, syndrome),
	F(mlx5_err_cqe, s_wqe_opcode_qpn),
	F(mlx5_err_cqe, wqe_counter),
	F(mlx5_err_cqe, signature),
	F(mlx5_err_cqe, op_own),
};

int dvo_dv_nfields(void) { return sizeof(dv_fields) / sizeof(dv_fields[0]); }
dvo_field dvo_dv_field(int i) { return dv_fields[i]; }

#define C(n) { #n, (long long)(n) }

static const dvo_named dv_consts[] = {
	C(MLX5_OPCODE_NOP), C(MLX5_OPCODE_SEND_INVAL), C(MLX5_OPCODE_RDMA_WRITE),
	C(MLX5_OPCODE_RDMA_WRITE_IMM), C(MLX5_OPCODE_SEND), C(MLX5_OPCODE_SEND_IMM),
	C(MLX5_OPCODE_RDMA_READ), C(MLX5_OPCODE_ATOMIC_CS), C(MLX5_OPCODE_ATOMIC_FA),
	C(MLX5_WQE_CTRL_CQ_UPDATE), C(MLX5_WQE_CTRL_SOLICITED), C(MLX5_WQE_CTRL_FENCE),
	C(MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE),
	C(MLX5_SEND_WQE_BB), C(MLX5_SEND_WQE_SHIFT), C(MLX5_INLINE_SEG), C(MLX5_INVALID_LKEY),
	C(MLX5_CQE_OWNER_MASK), C(MLX5_CQE_REQ), C(MLX5_CQE_RESP_WR_IMM), C(MLX5_CQE_RESP_SEND),
	C(MLX5_CQE_RESP_SEND_IMM), C(MLX5_CQE_RESP_SEND_INV), C(MLX5_CQE_RESIZE_CQ),
	C(MLX5_CQE_NO_PACKET), C(MLX5_CQE_SIG_ERR), C(MLX5_CQE_REQ_ERR), C(MLX5_CQE_RESP_ERR),
	C(MLX5_CQE_INVALID), C(MLX5_INLINE_SCATTER_32), C(MLX5_INLINE_SCATTER_64),
	C(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR), C(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR),
	C(MLX5_CQE_SYNDROME_LOCAL_PROT_ERR), C(MLX5_CQE_SYNDROME_WR_FLUSH_ERR),
	C(MLX5_CQE_SYNDROME_MW_BIND_ERR), C(MLX5_CQE_SYNDROME_BAD_RESP_ERR),
	C(MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR), C(MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR),
	C(MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR), C(MLX5_CQE_SYNDROME_REMOTE_OP_ERR),
	C(MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR), C(MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR),
	C(MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR), C(MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT),
	C(MLX5_CQ_DOORBELL), C(MLX5_CQ_DB_REQ_NOT_SOL), C(MLX5_CQ_DB_REQ_NOT),
	C(MLX5_RCV_DBR), C(MLX5_SND_DBR),
	C(MLX5_MMAP_GET_REGULAR_PAGES_CMD), C(MLX5_MMAP_GET_NC_PAGES_CMD),
	C(IBV_WC_SUCCESS), C(IBV_WC_LOC_LEN_ERR), C(IBV_WC_LOC_QP_OP_ERR), C(IBV_WC_LOC_EEC_OP_ERR),
	C(IBV_WC_LOC_PROT_ERR), C(IBV_WC_WR_FLUSH_ERR), C(IBV_WC_MW_BIND_ERR), C(IBV_WC_BAD_RESP_ERR),
	C(IBV_WC_LOC_ACCESS_ERR), C(IBV_WC_REM_INV_REQ_ERR), C(IBV_WC_REM_ACCESS_ERR),
	C(IBV_WC_REM_OP_ERR), C(IBV_WC_RETRY_EXC_ERR), C(IBV_WC_RNR_RETRY_EXC_ERR),
	C(IBV_WC_LOC_RDD_VIOL_ERR), C(IBV_WC_REM_INV_RD_REQ_ERR), C(IBV_WC_REM_ABORT_ERR),
	C(IBV_WC_INV_EECN_ERR), C(IBV_WC_INV_EEC_STATE_ERR), C(IBV_WC_FATAL_ERR),
	C(IBV_WC_RESP_TIMEOUT_ERR), C(IBV_WC_GENERAL_ERR),
	C(IBV_WC_SEND), C(IBV_WC_RDMA_WRITE), C(IBV_WC_RDMA_READ), C(IBV_WC_COMP_SWAP),
	C(IBV_WC_FETCH_ADD), C(IBV_WC_BIND_MW), C(IBV_WC_LOCAL_INV), C(IBV_WC_RECV),
	C(IBV_WC_RECV_RDMA_WITH_IMM),
	C(IBV_WC_GRH), C(IBV_WC_WITH_IMM), C(IBV_WC_WITH_INV),
};

int dvo_dv_nconsts(void) { return sizeof(dv_consts) / sizeof(dv_consts[0]); }
dvo_named dvo_dv_const(int i) { return dv_consts[i]; }

#else /* !DVO_HAVE_DV */

int dvo_dv_available(void) { return 0; }
dvo_bytes16 dvo_ctrl_seg(uint16_t pi, uint8_t opcode, uint8_t opmod, uint32_t qpn,
			 uint8_t fm_ce_se, uint8_t ds, uint8_t signature, uint32_t imm)
{ dvo_bytes16 o; memset(&o, 0, sizeof(o)); return o; }
dvo_bytes16 dvo_data_seg(uint32_t length, uint32_t lkey, uint64_t addr)
{ dvo_bytes16 o; memset(&o, 0, sizeof(o)); return o; }
dvo_bytes16 dvo_raddr_seg(uint64_t raddr, uint32_t rkey)
{ dvo_bytes16 o; memset(&o, 0, sizeof(o)); return o; }
dvo_bytes16 dvo_atomic_seg(uint64_t swap_add, uint64_t compare)
{ dvo_bytes16 o; memset(&o, 0, sizeof(o)); return o; }
dvo_bytes16 dvo_inline_hdr(uint32_t n)
{ dvo_bytes16 o; memset(&o, 0, sizeof(o)); return o; }
dvo_bytes64 dvo_cqe64(const dvo_cqe *f) { dvo_bytes64 o; memset(&o, 0, sizeof(o)); return o; }
dvo_bytes64 dvo_err_cqe64(const dvo_err_cqe *f) { dvo_bytes64 o; memset(&o, 0, sizeof(o)); return o; }
dvo_getters dvo_cqe_getters(dvo_bytes64 b) { dvo_getters g; memset(&g, 0, sizeof(g)); return g; }
int dvo_dv_nfields(void) { return 0; }
dvo_field dvo_dv_field(int i) { dvo_field f = { "", "", 0, 0 }; return f; }
int dvo_dv_nconsts(void) { return 0; }
dvo_named dvo_dv_const(int i) { dvo_named c = { "", 0 }; return c; }

#endif

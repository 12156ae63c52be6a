// The driver-data side of the oracle: struct layouts and encodings of the uapi header
// <rdma/mlx5-abi.h>, the ABI the kernel's mlx5_ib reads and writes.
#include <stddef.h>
#include <string.h>
#include "oracle.h"

#if defined(__has_include)
#if __has_include(<rdma/mlx5-abi.h>)
#define DVO_HAVE_ABI 1
#endif
#endif

#ifdef DVO_HAVE_ABI
#include <rdma/mlx5-abi.h>
#include <rdma/mlx5_user_ioctl_cmds.h>
#include <rdma/mlx5_user_ioctl_verbs.h>

int dvo_abi_available(void) { return 1; }

#define F(s, f) { #s, #f, (long)offsetof(struct s, f), (long)sizeof(((struct s *)0)->f) }
#define S(s) { #s, "", 0, (long)sizeof(struct s) }

static const dvo_field abi_fields[] = {
	S(mlx5_ib_alloc_ucontext_req),
	S(mlx5_ib_alloc_ucontext_req_v2),
	F(mlx5_ib_alloc_ucontext_req_v2, total_num_bfregs),
	F(mlx5_ib_alloc_ucontext_req_v2, num_low_latency_bfregs),
	F(mlx5_ib_alloc_ucontext_req_v2, flags),
	F(mlx5_ib_alloc_ucontext_req_v2, comp_mask),
	F(mlx5_ib_alloc_ucontext_req_v2, max_cqe_version),
	F(mlx5_ib_alloc_ucontext_req_v2, lib_caps),
	S(mlx5_ib_alloc_ucontext_resp),
	F(mlx5_ib_alloc_ucontext_resp, qp_tab_size),
	F(mlx5_ib_alloc_ucontext_resp, bf_reg_size),
	F(mlx5_ib_alloc_ucontext_resp, tot_bfregs),
	F(mlx5_ib_alloc_ucontext_resp, cache_line_size),
	F(mlx5_ib_alloc_ucontext_resp, max_sq_desc_sz),
	F(mlx5_ib_alloc_ucontext_resp, max_rq_desc_sz),
	F(mlx5_ib_alloc_ucontext_resp, max_send_wqebb),
	F(mlx5_ib_alloc_ucontext_resp, max_recv_wr),
	F(mlx5_ib_alloc_ucontext_resp, max_srq_recv_wr),
	F(mlx5_ib_alloc_ucontext_resp, num_ports),
	F(mlx5_ib_alloc_ucontext_resp, flow_action_flags),
	F(mlx5_ib_alloc_ucontext_resp, comp_mask),
	F(mlx5_ib_alloc_ucontext_resp, response_length),
	F(mlx5_ib_alloc_ucontext_resp, cqe_version),
	F(mlx5_ib_alloc_ucontext_resp, cmds_supp_uhw),
	F(mlx5_ib_alloc_ucontext_resp, eth_min_inline),
	F(mlx5_ib_alloc_ucontext_resp, clock_info_versions),
	F(mlx5_ib_alloc_ucontext_resp, hca_core_clock_offset),
	F(mlx5_ib_alloc_ucontext_resp, log_uar_size),
	F(mlx5_ib_alloc_ucontext_resp, num_uars_per_page),
	F(mlx5_ib_alloc_ucontext_resp, num_dyn_bfregs),
	F(mlx5_ib_alloc_ucontext_resp, dump_fill_mkey),
	S(mlx5_ib_create_cq),
	F(mlx5_ib_create_cq, buf_addr),
	F(mlx5_ib_create_cq, db_addr),
	F(mlx5_ib_create_cq, cqe_size),
	F(mlx5_ib_create_cq, cqe_comp_en),
	F(mlx5_ib_create_cq, cqe_comp_res_format),
	F(mlx5_ib_create_cq, flags),
	F(mlx5_ib_create_cq, uar_page_index),
	S(mlx5_ib_create_cq_resp),
	F(mlx5_ib_create_cq_resp, cqn),
	S(mlx5_ib_create_qp),
	F(mlx5_ib_create_qp, buf_addr),
	F(mlx5_ib_create_qp, db_addr),
	F(mlx5_ib_create_qp, sq_wqe_count),
	F(mlx5_ib_create_qp, rq_wqe_count),
	F(mlx5_ib_create_qp, rq_wqe_shift),
	F(mlx5_ib_create_qp, flags),
	F(mlx5_ib_create_qp, uidx),
	F(mlx5_ib_create_qp, bfreg_index),
	F(mlx5_ib_create_qp, sq_buf_addr),
	F(mlx5_ib_create_qp, ece_options),
	F(mlx5_ib_create_qp, dci_streams),
	F(mlx5_ib_create_qp, reserved),
	S(mlx5_ib_create_qp_resp),
	F(mlx5_ib_create_qp_resp, bfreg_index),
	F(mlx5_ib_create_qp_resp, ece_options),
	F(mlx5_ib_create_qp_resp, comp_mask),
	F(mlx5_ib_create_qp_resp, tirn),
	F(mlx5_ib_create_qp_resp, tisn),
	F(mlx5_ib_create_qp_resp, rqn),
	F(mlx5_ib_create_qp_resp, sqn),
	F(mlx5_ib_create_qp_resp, tir_icm_addr),
};

int dvo_abi_nfields(void) { return sizeof(abi_fields) / sizeof(abi_fields[0]); }
dvo_field dvo_abi_field(int i) { return abi_fields[i]; }

#define C(n) { #n, (long long)(n) }

static const dvo_named abi_consts[] = {
	C(MLX5_IB_UVERBS_ABI_VERSION), C(MLX5_LIB_CAP_4K_UAR), C(MLX5_LIB_CAP_DYN_UAR), C(MLX5_IB_ALLOC_UCTX_DEVX),
	C(MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD), C(MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX),
	C(MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS),
	C(MLX5_QP_FLAG_SIGNATURE), C(MLX5_QP_FLAG_SCATTER_CQE), C(MLX5_QP_FLAG_BFREG_INDEX),
	C(MLX5_QP_FLAG_UAR_PAGE_INDEX),
	C(MLX5_IB_MMAP_REGULAR_PAGE), C(MLX5_IB_MMAP_GET_CONTIGUOUS_PAGES), C(MLX5_IB_MMAP_WC_PAGE),
	C(MLX5_IB_MMAP_NC_PAGE), C(MLX5_IB_MMAP_CORE_CLOCK), C(MLX5_IB_MMAP_ALLOC_WC),
	C(MLX5_IB_MMAP_CLOCK_INFO), C(MLX5_IB_MMAP_DEVICE_MEM),
	C(MLX5_IB_OBJECT_UAR), C(MLX5_IB_METHOD_UAR_OBJ_ALLOC), C(MLX5_IB_METHOD_UAR_OBJ_DESTROY),
	C(MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE), C(MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE),
	C(MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET), C(MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH),
	C(MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID), C(MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE),
	C(MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF), C(MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC),
};

int dvo_abi_nconsts(void) { return sizeof(abi_consts) / sizeof(abi_consts[0]); }
dvo_named dvo_abi_const(int i) { return abi_consts[i]; }

#define OUT(s) dvo_bytes128 out; memset(&out, 0, sizeof(out)); memcpy(out.b, &s, sizeof(s)); return out

dvo_bytes128 dvo_alloc_ucontext_req_v2(uint32_t total_num_bfregs, uint32_t num_low_latency_bfregs,
				      uint32_t flags, uint32_t comp_mask, uint8_t max_cqe_version,
				      uint64_t lib_caps)
{
	struct mlx5_ib_alloc_ucontext_req_v2 r;

	memset(&r, 0, sizeof(r));
	r.total_num_bfregs = total_num_bfregs;
	r.num_low_latency_bfregs = num_low_latency_bfregs;
	r.flags = flags;
	r.comp_mask = comp_mask;
	r.max_cqe_version = max_cqe_version;
	r.lib_caps = lib_caps;
	OUT(r);
}

dvo_bytes128 dvo_alloc_ucontext_resp(const uint64_t *v)
{
	struct mlx5_ib_alloc_ucontext_resp r;
	int i = 0;

	memset(&r, 0, sizeof(r));
	r.qp_tab_size = v[i++];
	r.bf_reg_size = v[i++];
	r.tot_bfregs = v[i++];
	r.cache_line_size = v[i++];
	r.max_sq_desc_sz = v[i++];
	r.max_rq_desc_sz = v[i++];
	r.max_send_wqebb = v[i++];
	r.max_recv_wr = v[i++];
	r.max_srq_recv_wr = v[i++];
	r.num_ports = v[i++];
	r.flow_action_flags = v[i++];
	r.comp_mask = v[i++];
	r.response_length = v[i++];
	r.cqe_version = v[i++];
	r.cmds_supp_uhw = v[i++];
	r.eth_min_inline = v[i++];
	r.clock_info_versions = v[i++];
	r.hca_core_clock_offset = v[i++];
	r.log_uar_size = v[i++];
	r.num_uars_per_page = v[i++];
	r.num_dyn_bfregs = v[i++];
	r.dump_fill_mkey = v[i++];
	OUT(r);
}

dvo_bytes128 dvo_create_cq(uint64_t buf_addr, uint64_t db_addr, uint32_t cqe_size,
			  uint8_t cqe_comp_en, uint8_t cqe_comp_res_format, uint16_t flags,
			  uint16_t uar_page_index)
{
	struct mlx5_ib_create_cq c;

	memset(&c, 0, sizeof(c));
	c.buf_addr = buf_addr;
	c.db_addr = db_addr;
	c.cqe_size = cqe_size;
	c.cqe_comp_en = cqe_comp_en;
	c.cqe_comp_res_format = cqe_comp_res_format;
	c.flags = flags;
	c.uar_page_index = uar_page_index;
	OUT(c);
}

dvo_bytes128 dvo_create_cq_resp(uint32_t cqn)
{
	struct mlx5_ib_create_cq_resp r;

	memset(&r, 0, sizeof(r));
	r.cqn = cqn;
	OUT(r);
}

dvo_bytes128 dvo_create_qp(uint64_t buf_addr, uint64_t db_addr, uint32_t sq_wqe_count,
			  uint32_t rq_wqe_count, uint32_t rq_wqe_shift, uint32_t flags,
			  uint32_t uidx, uint32_t bfreg_index, uint64_t sq_buf_addr,
			  uint32_t ece_options, uint8_t log_num_concurent, uint8_t log_num_errored)
{
	struct mlx5_ib_create_qp q;

	memset(&q, 0, sizeof(q));
	q.buf_addr = buf_addr;
	q.db_addr = db_addr;
	q.sq_wqe_count = sq_wqe_count;
	q.rq_wqe_count = rq_wqe_count;
	q.rq_wqe_shift = rq_wqe_shift;
	q.flags = flags;
	q.uidx = uidx;
	q.bfreg_index = bfreg_index;
	q.sq_buf_addr = sq_buf_addr;
	q.ece_options = ece_options;
	q.dci_streams.log_num_concurent = log_num_concurent;
	q.dci_streams.log_num_errored = log_num_errored;
	OUT(q);
}

dvo_bytes128 dvo_create_qp_resp(uint32_t bfreg_index, uint32_t ece_options, uint32_t comp_mask,
			       uint32_t tirn, uint32_t tisn, uint32_t rqn, uint32_t sqn,
			       uint64_t tir_icm_addr)
{
	struct mlx5_ib_create_qp_resp r;

	memset(&r, 0, sizeof(r));
	r.bfreg_index = bfreg_index;
	r.ece_options = ece_options;
	r.comp_mask = comp_mask;
	r.tirn = tirn;
	r.tisn = tisn;
	r.rqn = rqn;
	r.sqn = sqn;
	r.tir_icm_addr = tir_icm_addr;
	OUT(r);
}

#else /* !DVO_HAVE_ABI */

int dvo_abi_available(void) { return 0; }
int dvo_abi_nfields(void) { return 0; }
dvo_field dvo_abi_field(int i) { dvo_field f = { "", "", 0, 0 }; return f; }
int dvo_abi_nconsts(void) { return 0; }
dvo_named dvo_abi_const(int i) { dvo_named c = { "", 0 }; return c; }
#define ZERO { dvo_bytes128 o; memset(&o, 0, sizeof(o)); return o; }
dvo_bytes128 dvo_alloc_ucontext_req_v2(uint32_t a, uint32_t b, uint32_t c, uint32_t d, uint8_t e,
				      uint64_t f) ZERO
dvo_bytes128 dvo_alloc_ucontext_resp(const uint64_t *v) ZERO
dvo_bytes128 dvo_create_cq(uint64_t a, uint64_t b, uint32_t c, uint8_t d, uint8_t e, uint16_t f,
			  uint16_t g) ZERO
dvo_bytes128 dvo_create_cq_resp(uint32_t cqn) ZERO
dvo_bytes128 dvo_create_qp(uint64_t a, uint64_t b, uint32_t c, uint32_t d, uint32_t e, uint32_t f,
			  uint32_t g, uint32_t h, uint64_t i, uint32_t j, uint8_t k, uint8_t l) ZERO
dvo_bytes128 dvo_create_qp_resp(uint32_t a, uint32_t b, uint32_t c, uint32_t d, uint32_t e,
			       uint32_t f, uint32_t g, uint64_t h) ZERO

#endif

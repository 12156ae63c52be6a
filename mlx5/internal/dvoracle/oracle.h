/* Prototypes shared by the Go side of package dvoracle and its two C translation units:
 * dv.c (infiniband/mlx5dv.h, infiniband/verbs.h) and abi.c (rdma/mlx5-abi.h). The headers
 * are kept in separate units because the libibverbs and uapi copies of the ioctl enums
 * collide when included together. */
#ifndef SHIFT_DVORACLE_H
#define SHIFT_DVORACLE_H

#include <stdint.h>

typedef struct { unsigned char b[64]; } dvo_bytes64;
typedef struct { unsigned char b[16]; } dvo_bytes16;
typedef struct { unsigned char b[128]; } dvo_bytes128;

typedef struct {
	const char *strct;
	const char *name; /* "" for sizeof(strct) */
	long off;
	long size;
} dvo_field;

typedef struct {
	const char *name;
	long long value;
} dvo_named;

typedef struct {
	uint16_t wqe_id;
	uint8_t ml_path;
	uint16_t slid;
	uint32_t flags_rqpn;
	uint32_t srqn_uidx;
	uint32_t imm_inval_pkey;
	uint32_t byte_cnt;
	uint64_t timestamp;
	uint32_t sop_drop_qpn;
	uint16_t wqe_counter;
	uint8_t signature;
	uint8_t op_own;
} dvo_cqe;

typedef struct {
	uint32_t srqn;
	uint8_t vendor_err_synd;
	uint8_t syndrome;
	uint32_t s_wqe_opcode_qpn;
	uint16_t wqe_counter;
	uint8_t signature;
	uint8_t op_own;
} dvo_err_cqe;

typedef struct {
	uint8_t owner, se, format, opcode;
} dvo_getters;

int dvo_dv_available(void);
int dvo_abi_available(void);

dvo_bytes16 dvo_ctrl_seg(uint16_t pi, uint8_t opcode, uint8_t opmod, uint32_t qpn,
			 uint8_t fm_ce_se, uint8_t ds, uint8_t signature, uint32_t imm);
dvo_bytes16 dvo_data_seg(uint32_t length, uint32_t lkey, uint64_t addr);
dvo_bytes16 dvo_raddr_seg(uint64_t raddr, uint32_t rkey);
dvo_bytes16 dvo_atomic_seg(uint64_t swap_add, uint64_t compare);
dvo_bytes16 dvo_inline_hdr(uint32_t n);
dvo_bytes64 dvo_cqe64(const dvo_cqe *f);
dvo_bytes64 dvo_err_cqe64(const dvo_err_cqe *f);
dvo_getters dvo_cqe_getters(dvo_bytes64 b);

int dvo_dv_nfields(void);
dvo_field dvo_dv_field(int i);
int dvo_dv_nconsts(void);
dvo_named dvo_dv_const(int i);

int dvo_abi_nfields(void);
dvo_field dvo_abi_field(int i);
int dvo_abi_nconsts(void);
dvo_named dvo_abi_const(int i);

dvo_bytes128 dvo_alloc_ucontext_req_v2(uint32_t total_num_bfregs, uint32_t num_low_latency_bfregs,
				      uint32_t flags, uint32_t comp_mask, uint8_t max_cqe_version,
				      uint64_t lib_caps);
dvo_bytes128 dvo_alloc_ucontext_resp(const uint64_t *v); /* fields in declaration order */
dvo_bytes128 dvo_create_cq(uint64_t buf_addr, uint64_t db_addr, uint32_t cqe_size,
			  uint8_t cqe_comp_en, uint8_t cqe_comp_res_format, uint16_t flags,
			  uint16_t uar_page_index);
dvo_bytes128 dvo_create_cq_resp(uint32_t cqn);
dvo_bytes128 dvo_create_qp(uint64_t buf_addr, uint64_t db_addr, uint32_t sq_wqe_count,
			  uint32_t rq_wqe_count, uint32_t rq_wqe_shift, uint32_t flags,
			  uint32_t uidx, uint32_t bfreg_index, uint64_t sq_buf_addr,
			  uint32_t ece_options, uint8_t log_num_concurent, uint8_t log_num_errored);
dvo_bytes128 dvo_create_qp_resp(uint32_t bfreg_index, uint32_t ece_options, uint32_t comp_mask,
			       uint32_t tirn, uint32_t tisn, uint32_t rqn, uint32_t sqn,
			       uint64_t tir_icm_addr);

#endif

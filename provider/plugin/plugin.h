/*
 * The C side of libmlx5-shift: the objects the plugin hands to libibverbs (each embeds the
 * libibverbs struct first, as every provider's do) and the functions its C files share.
 * The Go side reaches these structs through cgo; every C object holds the cgo.Handle of its
 * Go object in `go`. This header declares only: cgo includes it in the export stubs.
 */
#ifndef SHIFT_PLUGIN_H
#define SHIFT_PLUGIN_H

#include <pthread.h>
#include <stdint.h>
#include "abi34.h"
#include "fast.h"
#include "spost.h"

/* How a device is served: its kernel uverbs device (a ConnectX with mlx5_ib), or a ConnectX
 * the plugin emulates in-process (package mlx5/emu), talking RoCEv2 over UDP. */
enum shift_mode {
	SHIFT_MODE_HW = 1,
	SHIFT_MODE_EMU = 2,
};

struct shift_device {
	struct verbs_device vdev; /* first: libibverbs' container_of */
	int mode;
};

struct shift_context {
	struct verbs_context vctx; /* its ibv_context is the context applications hold */
	uintptr_t go;
	int mode;
	struct shift_fast_ctx *fast; /* the C data path's QP table and BlueFlame registers */
};

struct shift_pd {
	struct ibv_pd pd;
	uintptr_t go;
};

struct shift_mr {
	struct verbs_mr vmr;
	uintptr_t go;
};

struct shift_wc;

struct shift_cq {
	struct verbs_cq vcq;
	uintptr_t go;
	pthread_mutex_t lock; /* serialises polls, as libmlx5's cq lock does */
	struct shift_wc *wc;  /* poll buffer for Go */
	int nwc;
	struct shift_cqr *fast; /* non-NULL: the ring is polled in C (fast.c) */
	struct shift_cq_peek peek; /* SHIFT mode: an empty poll answered in C (fast.h) */
	struct shift_spoll *spoll; /* SHIFT mode: the Default state's polls in C (spoll.c) */
};

/* The ibv_qp_ex work-request builder of one QP (wr_start ... wr_complete): the WRs are
 * gathered as ibv_send_wr records and posted as one list by wr_complete. */
struct shift_wr_builder {
	struct ibv_send_wr *wrs;  /* max_wr records */
	struct ibv_sge *sges;     /* max_sge per record */
	uint8_t *inl;             /* max_inline bytes per record: inline data copied at wr_set_inline_data */
	uint32_t max_wr, max_sge, max_inline;
	uint32_t n;               /* WRs gathered since wr_start */
	int err;                  /* first error since wr_start, returned by wr_complete */
	pthread_mutex_t lock;     /* held from wr_start to wr_complete or wr_abort, as libmlx5 holds sq.lock */
	int live;                 /* lock initialised */
};

struct shift_swr;
struct shift_rwr;

struct shift_qp {
	struct verbs_qp vqp;
	uintptr_t go;
	pthread_mutex_t sq_lock; /* serialises posts, as libmlx5's sq.lock does */
	pthread_mutex_t rq_lock;
	struct shift_swr *swr;   /* max_send_wr records: a post_send list flattened for Go */
	struct shift_rwr *rwr;   /* max_recv_wr records */
	uint32_t max_send_wr, max_recv_wr;
	int sq_sig_all;
	struct shift_wr_builder wb;
	struct shift_fast_qp *fast; /* non-NULL: posts go to the rings in C (fast.c) */
	struct shift_spost *spost;  /* non-NULL: SHIFT mode's Default sends are C's (spost.c) */
	struct shift_srecv *srecv;  /* non-NULL: and its Default receives */
	struct shift_sview *sview;  /* non-NULL: its completions are retired by spoll.c */
};

/* Channels the plugin created itself (emulated devices, SHIFT mode): a pipe carrying the
 * same 8-byte completion-event records a kernel channel carries. */
struct shift_comp_channel {
	struct ibv_comp_channel ch;
	uintptr_t go;
};

/* One ibv_send_wr / ibv_recv_wr / ibv_wc without unions, for the Go side (cgo renders C
 * unions as byte arrays). Immediate data is in host order here; verbs.h carries it
 * big-endian. The ibv_sge arrays are read by Go in place: struct ibv_sge and verbs.SGE have
 * one layout (checked by the plugin's tests). */
struct shift_swr {
	uint64_t wr_id;
	uint64_t remote_addr;
	uint64_t compare_add;
	uint64_t swap;
	struct ibv_sge *sg_list;
	uint32_t num_sge;
	uint32_t opcode;
	uint32_t send_flags;
	uint32_t imm;
	uint32_t rkey;
	uint32_t pad;
};

struct shift_rwr {
	uint64_t wr_id;
	struct ibv_sge *sg_list;
	uint32_t num_sge;
	uint32_t pad;
};

struct shift_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t imm;
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t wc_flags;
	uint32_t sl;
	uint32_t pad;
};

#define shift_container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

static inline struct shift_context *to_sctx(struct ibv_context *c)
{
	return shift_container_of(c, struct shift_context, vctx.context);
}

static inline struct shift_qp *to_sqp(struct ibv_qp *q)
{
	return shift_container_of(q, struct shift_qp, vqp.qp);
}

static inline struct shift_cq *to_scq(struct ibv_cq *c)
{
	return shift_container_of(c, struct shift_cq, vcq.cq);
}

extern struct shift_private_abi shift_abi;
extern const struct verbs_context_ops shift_ctx_ops;
extern volatile int shift_forked;

/* ops_*.c */
int shift_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
void shift_qp_ex_init(struct shift_qp *qp, const struct ibv_qp_cap *cap);
void shift_qp_ex_free(struct shift_qp *qp);
struct ibv_comp_channel *shift_plugin_create_comp_channel(struct ibv_context *ctx);
int shift_plugin_destroy_comp_channel(struct ibv_comp_channel *ch);
int shift_is_plugin_context(struct ibv_context *ctx);
void shift_free_context(struct ibv_context *ctx);

/* refuse.c: what the provider does not offer, refused with EOPNOTSUPP and said once. */
void shift_refuse(int *once, const char *op, const char *why);
int shift_qp_type_refused(const struct ibv_qp_init_attr *attr);
struct ibv_srq *shift_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
struct ibv_srq *shift_create_srq_ex(struct ibv_context *c, struct ibv_srq_init_attr_ex *attr);
struct ibv_xrcd *shift_open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *attr);
struct ibv_cq_ex *shift_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *attr);
struct ibv_mw *shift_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int shift_resize_cq(struct ibv_cq *cq, int cqe);

#endif

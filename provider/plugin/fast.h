/*
 * The C data path of libmlx5-shift: post_send, post_recv, poll_cq and the CQ arm over the
 * rings, doorbell records and UAR registers the Go provider created (provider.QPRings,
 * provider.CQRings), for QPs and CQs whose data path was handed over to C
 * (provider.QP.DetachDataPath). It follows rdma-core's providers/mlx5 (qp.c _mlx5_post_send,
 * post_send_db; cq.c mlx5_poll_one, mlx5_arm_cq) and writes the same bytes as package mlx5's
 * FastWQE and reads CQEs as its FastWC does: fast_diff.go and fast_test.go compare them on
 * random inputs. The layouts are mlx5dv.h's (the oracle package mlx5 is checked against).
 */
#ifndef SHIFT_FAST_H
#define SHIFT_FAST_H

#include <endian.h>
#include <pthread.h>
#include <stdint.h>
#include <infiniband/mlx5dv.h>

/* The doorbell record words of a CQ (rdma-core's private mlx5.h, not in mlx5dv.h). */
enum {
	SHIFT_CQ_SET_CI = 0,
	SHIFT_CQ_ARM_DB = 1,
};

/* A lock that is a no-op when the application promised one thread (MLX5_SINGLE_THREADED=1,
 * as libmlx5 reads it): struct mlx5_spinlock. */
struct shift_lock {
	pthread_spinlock_t s;
	int need;
};

static inline void shift_lock(struct shift_lock *l)
{
	if (l->need)
		pthread_spin_lock(&l->s);
}

static inline void shift_unlock(struct shift_lock *l)
{
	if (l->need)
		pthread_spin_unlock(&l->s);
}

/* A BlueFlame register (struct mlx5_bf), shared by the QPs the kernel gave the same bfreg. */
struct shift_bf {
	uint8_t *reg;        /* the two halves */
	uint32_t offset;     /* the half the next doorbell goes to */
	uint32_t buf_size;   /* bytes per half; 0: no BlueFlame */
	uint32_t index;      /* gross bfreg index; 0 has no BlueFlame */
	int need_lock;
	pthread_spinlock_t lock;
};

/* The send queue: ring, counters and per-WQE tables (struct mlx5_wq and mlx5_qp's wrid and
 * wqe_head). head and cur_post belong to the poster, tail to the poller. */
struct shift_sq {
	uint8_t *buf;
	uint32_t wqe_cnt;    /* 64-byte blocks, a power of two */
	uint32_t max_post, max_gs, max_inline;
	uint32_t cur_post;   /* producer, in blocks */
	uint32_t head;       /* WRs posted */
	uint32_t tail;       /* WRs retired (atomic: written by the poller) */
	uint32_t qpn;
	int sig_all;
	uint64_t *wrid;      /* by the index of a WQE's first block */
	uint32_t *wqe_head;  /* head after that WR */
	volatile __be32 *db; /* doorbell record: [0] receive counter, [1] send counter */
	struct shift_bf *bf;
	struct shift_lock lock;
};

/* The receive queue (struct mlx5_wq for the RQ). */
struct shift_rq {
	uint8_t *buf;
	uint32_t wqe_cnt, wqe_shift, max_post, max_gs;
	uint32_t head;       /* WRs posted */
	uint32_t tail;       /* WRs retired (atomic) */
	uint64_t *wrid;
	volatile __be32 *db;
	struct shift_lock lock;
};

/* A CQ ring (struct mlx5_cq). */
struct shift_cqr {
	uint8_t *buf;
	uint32_t ncqe;       /* a power of two of 64-byte CQEs */
	uint32_t cons_index;
	uint32_t arm_sn;     /* incremented per completion event (mlx5_cq_event) */
	uint32_t cqn;
	volatile __be32 *db; /* [0] set_ci, [1] arm */
	uint8_t *uar;        /* the UAR page whose MLX5_CQ_DOORBELL arms the CQ */
	struct shift_lock lock;
	struct shift_fast_qp *last; /* the QP of the last CQE (rdma-core's cur_rsc) */
};

/* A QP whose data path is C's. */
struct shift_fast_qp {
	struct shift_sq sq;
	struct shift_rq rq;
	uint32_t qpn;
};

/* Per context: the QPN table the poller resolves CQEs with (mlx5_find_qp: two levels of 4096,
 * written under lock, read without one) and the BlueFlame registers by bfreg index. */
#define SHIFT_QPT_SHIFT 12
#define SHIFT_QPT_SIZE (1 << SHIFT_QPT_SHIFT)
struct shift_sview;
struct shift_fast_ctx {
	pthread_mutex_t lock;
	struct shift_fast_qp **qpt[SHIFT_QPT_SIZE];
	struct shift_sview **svt[SHIFT_QPT_SIZE]; /* SHIFT mode's QPs, for spoll.c (same rules) */
	struct shift_bf **bf;
	uint32_t nbf;
	int single_threaded;
};

static inline struct shift_fast_qp *shift_fast_find(struct shift_fast_ctx *c, uint32_t qpn)
{
	struct shift_fast_qp **t = __atomic_load_n(&c->qpt[(qpn >> SHIFT_QPT_SHIFT) & (SHIFT_QPT_SIZE - 1)], __ATOMIC_ACQUIRE);

	return t ? __atomic_load_n(&t[qpn & (SHIFT_QPT_SIZE - 1)], __ATOMIC_ACQUIRE) : NULL;
}

/* The rings Go describes (provider.QPRings, provider.CQRings), as the plugin hands them to C. */
struct shift_qp_rings {
	uint32_t qpn;
	int sig_all;
	uint8_t *sq, *rq;
	uint32_t sq_wqe_cnt, rq_wqe_cnt, rq_wqe_shift;
	uint32_t sq_max_post, rq_max_post, sq_max_gs, rq_max_gs, max_inline;
	uint8_t *dbrec;
	uint32_t bf_index, bf_buf_size;
	uint8_t *bf_reg;
	int bf_need_lock;
};

struct shift_cq_rings {
	uint32_t cqn, ncqe;
	uint8_t *buf, *dbrec, *uar;
};

struct shift_fast_ctx *shift_fast_ctx_new(void);
void shift_fast_ctx_free(struct shift_fast_ctx *c);
struct shift_fast_qp *shift_fast_qp_new(struct shift_fast_ctx *c, const struct shift_qp_rings *r);
/* shift_fast_qp_publish makes the QP's CQEs resolvable by the poller. */
int shift_fast_qp_publish(struct shift_fast_ctx *c, struct shift_fast_qp *qp);
void shift_fast_qp_unpublish(struct shift_fast_ctx *c, struct shift_fast_qp *qp);
void shift_fast_qp_free(struct shift_fast_qp *qp);
/* shift_fast_qp_reset is mlx5_init_qp_indices and the cleared doorbell record of a QP gone to
 * RESET; the caller holds both queues' locks and has cleaned the CQs. */
void shift_fast_qp_reset(struct shift_fast_qp *qp);
struct shift_cqr *shift_fast_cq_new(struct shift_fast_ctx *c, const struct shift_cq_rings *r);
void shift_fast_cq_free(struct shift_cqr *cq);

/* One completion as the C poll reads it (the fields of struct ibv_wc for RC). */
struct shift_fwc {
	uint64_t wr_id;
	uint32_t status, opcode, vendor_err, byte_len, qp_num, src_qp, wc_flags, sl;
	__be32 imm;
};

int shift_sq_validate(const struct shift_sq *sq, const struct ibv_send_wr *wr);
/* shift_wr_check is the provider's per-WR checks (sendQueue.validate's loop): the errno of
 * a WR it refuses (EINVAL, or ENOMEM for inline data over max_inline), else 0. */
int shift_wr_check(const struct ibv_send_wr *w, uint32_t max_gs, uint32_t max_inline);
/* shift_rwqe_write writes w's scatter list as a receive WQE of stride_gs data segments:
 * zero-length entries skipped, a terminator when shorter than the stride (mlx5_post_recv). */
void shift_rwqe_write(uint8_t *wqe, uint32_t stride_gs, const struct ibv_recv_wr *w);
/* shift_wqe_encode writes one validated WR as a WQE at block position cur of a ring of wqe_cnt
 * blocks (encodeWR's bytes, with ce the QP's signal-all bit and no fence carried over) and
 * returns the blocks it occupies, its size in 16-byte units (*ds) and whether its data went
 * inline (*inl). */
uint32_t shift_wqe_encode(uint8_t *ring, uint32_t wqe_cnt, uint32_t cur, uint32_t qpn, uint8_t ce,
			  const struct ibv_send_wr *w, int *ds, int *inl);
/* shift_sq_write builds the validated list's WQEs and returns the last one's control segment,
 * its size in 16-byte units (*ds) and whether it is inline (*inl). */
uint8_t *shift_sq_write(struct shift_sq *sq, const struct ibv_send_wr *wr, int *nreq, int *ds, int *inl);
void shift_sq_ring(struct shift_sq *sq, int nreq, const uint8_t *ctrl, int ds, int inl);
/* shift_bf_write writes a doorbell to the register half at dst: with bf, the BlueFlame copy of
 * the WQE at ctrl (ds 16-byte units, in whole 64-byte blocks, wrapping at the end of a ring of
 * wqe_cnt blocks), else the 8-byte doorbell (its control segment's first 8 bytes). */
void shift_bf_write(volatile uint64_t *dst, const uint8_t *ring, uint32_t wqe_cnt, const uint8_t *ctrl, int ds, int bf);
int shift_rq_post(struct shift_rq *rq, const struct ibv_recv_wr *wr);
/* shift_cq_next reads the next software-owned CQE of cq into *w without retiring anything:
 * returns 0 when none, else 1 (and *qpn, *wqe_counter, *receive for the caller to retire). */
int shift_cq_next(struct shift_cqr *cq, struct shift_fwc *w, uint16_t *wqe_counter, int *receive);
void shift_cq_update_ci(struct shift_cqr *cq);
void shift_cq_arm(struct shift_cqr *cq, int solicited);
uint64_t shift_sq_retire(struct shift_sq *sq, uint16_t wqe_counter);
uint64_t shift_rq_retire(struct shift_rq *rq, uint16_t wqe_counter);
void shift_cq_clean(struct shift_cqr *cq, uint32_t qpn);

/* shift_cq_empty reports whether the next CQE is still the device's, without the CQ lock, so
 * that an empty poll is two loads. The answer may be stale when another thread polls the CQ
 * at the same time, which a poll racing a poll may see anyway; a CQ that looks non-empty is
 * polled under the lock, which checks again. */
static inline int shift_cq_empty(const struct shift_cqr *cq)
{
	uint32_t ci = __atomic_load_n(&cq->cons_index, __ATOMIC_RELAXED);
	uint8_t op_own = __atomic_load_n(cq->buf + (size_t)(ci & (cq->ncqe - 1)) * 64 + 63, __ATOMIC_RELAXED);

	return op_own >> 4 == MLX5_CQE_INVALID || !!(op_own & MLX5_CQE_OWNER_MASK) != !!(ci & cq->ncqe);
}

/* What a SHIFT-mode CQ (whose polls go through Go) shows C so that an empty poll needs no
 * call into Go: the failover CQ's fast-path gate (failover.CQ.ShareGate: zero while open,
 * and while open the default CQ alone holds the application's completions) and the default
 * CQ's ring with its doorbell record, whose consumer index Go's poller publishes. */
struct shift_cq_peek {
	uint32_t gate;     /* written by Go's atomics; C only loads it */
	uint32_t ncqe;     /* zero: no peek (the CQ is polled through Go every time) */
	const uint8_t *buf;
	const volatile __be32 *db;
};

/* shift_peek_empty reports whether a SHIFT-mode poll would return nothing: the gate is open
 * and the default CQ's next entry (at the published consumer index) is still the device's.
 * Like shift_cq_empty, a racing poll may make the answer stale in either direction; a CQ that
 * looks non-empty is polled through Go, which decides. */
static inline int shift_peek_empty(const struct shift_cq_peek *p)
{
	uint32_t ci;
	uint8_t op_own;

	if (!p->ncqe || __atomic_load_n(&p->gate, __ATOMIC_ACQUIRE) != 0)
		return 0;
	ci = be32toh(__atomic_load_n(&p->db[0], __ATOMIC_ACQUIRE)) & 0xffffff;
	op_own = __atomic_load_n(p->buf + (size_t)(ci & (p->ncqe - 1)) * 64 + 63, __ATOMIC_ACQUIRE);
	return op_own >> 4 == MLX5_CQE_INVALID || !!(op_own & MLX5_CQE_OWNER_MASK) != !!(ci & p->ncqe);
}

/* The verbs: post_send, post_recv and poll_cq over C-owned rings, each under its queue's lock. */
int shift_fast_post_send(struct shift_fast_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int shift_fast_post_recv(struct shift_fast_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int shift_fast_poll(struct shift_fast_ctx *c, struct shift_cqr *cq, int want, struct ibv_wc *wc);

#endif

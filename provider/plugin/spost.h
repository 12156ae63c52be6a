/*
 * SHIFT mode's post_send in C. A SHIFT QP's posts go through the failover layer (Go), whose
 * Default state is the provider's post on the default QP behind the QP's send gate. This
 * poster does that post without entering Go: it enters the gate as PostSend does
 * (failover.SendGateShare), finds it open (an armed failure injection keeps it closed), and posts on the
 * default QP's send queue exactly as the provider's PostSend does (provider.SendShare: the same
 * limits, WQE bytes, per-WQE tables and doorbell), so the failover layer's fallback, which
 * reads those tables and copies the WQEs, sees one history whoever posted. Anything it does
 * not take (the gate not open, a list the provider would refuse) it leaves
 * to Go before writing anything.
 */
#ifndef SHIFT_SPOST_H
#define SHIFT_SPOST_H

#include <stdint.h>
#include <infiniband/verbs.h>

/* The words of provider.SendShare and failover.SendGateShare. Go's int is 64 bits and its
 * bool one byte on the platforms the plugin builds for. */
struct shift_spost {
	/* The failover QP's send gate. */
	uint32_t *gate_state; /* failover.GateOpen: the post is the default QP's */
	uint32_t *gate_busy;
	int asym;             /* the closer makes every thread execute a barrier (membarrier) */

	/* The default QP's send queue. */
	uint32_t *qp_state;   /* verbs.QPState: posts in RTS only */
	uint8_t *ring;
	uint32_t wqe_cnt, qpn;
	int sig_all;
	uint32_t max_post, reserve, max_gs, max_inline;
	uint32_t *cur_post, *head, *internal, *two, *rung;
	uint64_t *retired;    /* WRs retired (low half) | position after the last retired WQE */
	uint32_t *int_retired;
	uint64_t *wrid;       /* the tables, by the block index of a WQE's first block */
	uint32_t *wqe_head, *pos, *int_at, *two_at;
	uint32_t *start_of;   /* by the block index of a WQE's last block */
	uint8_t *nbb, *mark;
	volatile __be32 *db;  /* [1]: the send counter */
	uint8_t *bf_reg;
	uint32_t bf_index, bf_buf_size;
	int prefer_bf, shut_up_bf;
	int64_t *bf_offset;   /* the register's half selector */
	int bf_need_lock;     /* the register is shared between QPs: rung under bf_lock */
	uint32_t *bf_lock;    /* mlx5.BFReg's spin lock word, Go's and this poster's alike */
};

/* The words of provider.RecvShare and failover.RecvGateShare. */
struct shift_srecv {
	/* The failover QP's receive gate and receive log. */
	uint32_t *gate_state;
	uint32_t *gate_busy;
	int asym;
	uint32_t max_recv_wr;
	struct shift_rlog_rec { /* failover.RecvLogRecord */
		uint64_t wr_id;
		uint32_t nsge, pad;
	} *log;
	uint64_t log_mask;
	struct ibv_sge *log_sge; /* verbs.SGE is struct ibv_sge */
	uint32_t log_stride;
	uint64_t *posted;

	/* The default QP's receive queue. */
	uint32_t *qp_state;
	uint8_t *ring;
	uint32_t wqe_cnt, wqe_shift, max_post, reserve, max_gs;
	uint32_t *head, *ring_head, *internal, *tail, *int_retired;
	uint64_t *wrid;
	uint32_t *int_at;
	volatile __be32 *db; /* [0]: the receive counter */
};

enum {
	SHIFT_QPS_INIT = 1, /* verbs.QPStateInit ... */
	SHIFT_QPS_SQD = 4,
	SHIFT_QPS_RTS = 3, /* verbs.QPStateRTS */
	SHIFT_GATE_OPEN = 0, /* failover.GateOpen */
	SHIFT_GATE_BUSY = 1, /* failover.GateBusy: a CQ's fast-path poller inside */
	/* provider.SendMark: recorded as the Go post records it (an application that sets this
	 * bit of send_flags gets what it gets through Go). */
	SHIFT_SEND_MARK = 1 << 30,
};

/* shift_spost_send posts wr on the default QP and returns 0, or returns -1 having written
 * nothing: the list is Go's to post (the caller holds the QP's post lock either way). */
int shift_spost_send(struct shift_spost *s, const struct ibv_send_wr *wr);

/* A SHIFT QP as the C poller retires its completions (spoll.c): its queues' shared tables
 * and the failover QP's count of receives completed. Published in the context's svt. */
struct shift_sview {
	uint32_t qpn;
	struct shift_spost *sq; /* both set: a QP without one is not published */
	struct shift_srecv *rq;
	uint64_t *recv_done;
};

/* A SHIFT CQ's default ring (provider.CQPollShare) and the failover CQ's fast-path gate. */
struct shift_spoll {
	uint8_t *buf;
	uint32_t ncqe;
	uint32_t *ci;         /* mlx5.CQ's consumer index */
	volatile __be32 *db;  /* [0]: set_ci */
	uint32_t *gate;       /* struct shift_cq_peek's gate: open 0, busy 1, closed 2 */
};

struct shift_fast_ctx;
int shift_sview_publish(struct shift_fast_ctx *c, struct shift_sview *v);
void shift_sview_unpublish(struct shift_fast_ctx *c, struct shift_sview *v);

/* shift_spoll_cq polls up to want successful completions of known QPs from a SHIFT CQ whose
 * gate is open, as failover.CQ.Poll's fast path does, and returns how many; 0 leaves the poll
 * to Go (the gate not open, nothing there, or the next completion is one SHIFT must see: an
 * error, or a QP the poller does not know), with nothing consumed. */
int shift_spoll_cq(struct shift_fast_ctx *c, struct shift_spoll *p, int want, struct ibv_wc *wc);

/* shift_srecv_post logs and posts wr on the default QP and returns 0, or returns -1 having
 * written nothing: the list is Go's to post. */
int shift_srecv_post(struct shift_srecv *s, const struct ibv_recv_wr *wr);

#endif

/*
 * SHIFT mode's post_send in C: see spost.h. Each step mirrors a Go function, named beside
 * it; TestSharedPostMatchesGo posts random lists through both over two QPs of one device and
 * compares rings, tables, counters and doorbell records.
 */
#include <endian.h>
#include <sched.h>
#include <string.h>

#include "barrier.h"
#include "fast.h"
#include "spost.h"

/* postGate.enterIn(gateOpen). The mark and the load must not be reordered: with the
 * asymmetric barrier the closer's membarrier orders them on this thread's CPU, so the
 * compiler only must keep them in order; otherwise both are sequentially consistent (the
 * Dekker pattern with the closer's swap and load). */
static inline int gate_enter(uint32_t *state, uint32_t *busy, int asym)
{
	if (asym) {
		__atomic_store_n(busy, 1, __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (__atomic_load_n(state, __ATOMIC_ACQUIRE) == SHIFT_GATE_OPEN)
			return 1;
	} else {
		__atomic_store_n(busy, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(state, __ATOMIC_SEQ_CST) == SHIFT_GATE_OPEN)
			return 1;
	}
	__atomic_store_n(busy, 0, __ATOMIC_RELEASE);
	return 0;
}

/* postGate.leave: every store of the post visible to a closer that reads busy == 0. */
static inline void gate_leave(uint32_t *busy)
{
	__atomic_store_n(busy, 0, __ATOMIC_RELEASE);
}

/* sendQueue.validate for an application post: nonzero when the provider would refuse the
 * list (Go then posts it and reports the error the provider names). */
static int spost_refuses(const struct shift_spost *s, const struct ibv_send_wr *wr)
{
	/* retired first, then intRetired: the poller stores them in the other order. */
	uint32_t tail = (uint32_t)__atomic_load_n(s->retired, __ATOMIC_ACQUIRE);
	uint32_t int_retired = __atomic_load_n(s->int_retired, __ATOMIC_ACQUIRE);
	uint32_t outstanding = *s->head - tail;
	uint32_t limit = s->max_post - s->reserve;
	uint32_t used = outstanding - (*s->internal - int_retired);
	uint32_t n = 0;

	for (const struct ibv_send_wr *w = wr; w; w = w->next) {
		n++;
		if (shift_wr_check(w, s->max_gs, s->max_inline))
			return 1;
	}
	return (uint64_t)used + n > limit || (uint64_t)outstanding + n > s->max_post;
}

/* The two-sided opcodes consume a receive at the responder (twoSidedOp). */
static inline int two_sided(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

/* The register's lock, shared with Go (mlx5/bflock.go): a spin lock, yielding now and then
 * to a holder that was preempted. */
static void bf_lock(uint32_t *l)
{
	for (int i = 0;; i++) {
		uint32_t free = 0;

		if (__atomic_compare_exchange_n(l, &free, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return;
		if (i == 64) {
			sched_yield();
			i = 0;
		}
	}
}

/* QP.ringSQ through BFReg.RingFast: barrier, doorbell record, the register's lock when it is
 * shared, write-combining start, BlueFlame copy of a single small inline WQE or the 8-byte
 * doorbell, flush inside the lock (another CPU's doorbell must not overtake ours), alternate
 * halves. */
static void spost_ring(struct shift_spost *s, int nreq, uint32_t last_off, int ds, int inl)
{
	uint32_t cur = *s->cur_post;
	const uint8_t *ctrl = s->ring + last_off;
	volatile uint64_t *dst;
	int64_t off;

	/* WQE and table stores before the record that advertises them. */
	to_device_barrier();
	__atomic_store_n(&s->db[1], htobe32(cur & 0xffff), __ATOMIC_RELEASE);
	if (s->bf_need_lock)
		bf_lock(s->bf_lock);
	off = *s->bf_offset;
	dst = (volatile uint64_t *)(s->bf_reg + off);
	/* mmio_wc_start: the record globally visible before the register write. */
	flush_writes();
	shift_bf_write(dst, s->ring, s->wqe_cnt, ctrl, ds,
		       !s->shut_up_bf && nreq == 1 && s->bf_index && (inl || s->prefer_bf) && ds > 1 &&
			       (uint32_t)ds <= s->bf_buf_size / 16);
	flush_writes();
	*s->bf_offset = off ^ s->bf_buf_size;
	if (s->bf_need_lock)
		__atomic_store_n(s->bf_lock, 0, __ATOMIC_RELEASE);
	*s->rung = cur;
}

int shift_spost_send(struct shift_spost *s, const struct ibv_send_wr *wr)
{
	uint8_t ce = s->sig_all ? MLX5_WQE_CTRL_CQ_UPDATE : 0;
	uint32_t last_off = 0, mask = s->wqe_cnt - 1;
	int nreq = 0, ds = 0, inl = 0;

	if (!wr)
		return -1;
	if (!gate_enter(s->gate_state, s->gate_busy, s->asym))
		return -1;
	/* QP.PostSend's fast path: the provider's checkSend. */
	if (__atomic_load_n(s->qp_state, __ATOMIC_ACQUIRE) != SHIFT_QPS_RTS || spost_refuses(s, wr)) {
		gate_leave(s->gate_busy);
		return -1;
	}
	/* sendQueue.write and record. */
	for (const struct ibv_send_wr *w = wr; w; w = w->next, nreq++) {
		uint32_t cur = *s->cur_post, idx = cur & mask;
		uint32_t bbs = shift_wqe_encode(s->ring, s->wqe_cnt, cur, s->qpn, ce, w, &ds, &inl);

		*s->head += 1;
		s->int_at[idx] = *s->internal;
		s->wrid[idx] = w->wr_id;
		s->wqe_head[idx] = *s->head;
		s->pos[idx] = cur;
		s->nbb[idx] = (uint8_t)bbs;
		s->start_of[(cur + bbs - 1) & mask] = cur;
		s->two_at[idx] = *s->two;
		s->mark[idx] = !!(w->send_flags & SHIFT_SEND_MARK);
		if (two_sided(w->opcode))
			*s->two += 1;
		*s->cur_post = cur + bbs;
		last_off = idx * MLX5_SEND_WQE_BB;
	}
	spost_ring(s, nreq, last_off, ds, inl);
	gate_leave(s->gate_busy);
	return 0;
}

/* recvQueue.validate for an application post, and the failover layer's own limits
 * (postRecvDefault: the list within the application's queue, each scatter list within the
 * log's stride). */
static int srecv_refuses(const struct shift_srecv *s, const struct ibv_recv_wr *wr)
{
	/* tail first, then intRetired: the poller stores them in the other order. */
	uint32_t tail = __atomic_load_n(s->tail, __ATOMIC_ACQUIRE);
	uint32_t int_retired = __atomic_load_n(s->int_retired, __ATOMIC_ACQUIRE);
	uint32_t outstanding = *s->head - tail;
	uint32_t limit = s->max_post - s->reserve;
	uint32_t used = outstanding - (*s->internal - int_retired);
	uint32_t n = 0;

	for (const struct ibv_recv_wr *w = wr; w; w = w->next) {
		n++;
		if (w->num_sge < 0 || (uint32_t)w->num_sge > s->max_gs || (uint32_t)w->num_sge > s->log_stride)
			return 1;
	}
	return n > s->max_recv_wr || (uint64_t)used + n > limit || (uint64_t)outstanding + n > s->max_post;
}

/* QP.PostRecv in the Default state: log each receive (logRecv), write it (recvQueue.write over
 * mlx5.RQ.Post), publish the receive counter (RQ.Ring), then the log's head. */
int shift_srecv_post(struct shift_srecv *s, const struct ibv_recv_wr *wr)
{
	uint32_t mask = s->wqe_cnt - 1;
	uint64_t p;

	if (!wr)
		return -1;
	if (!gate_enter(s->gate_state, s->gate_busy, s->asym))
		return -1;
	{
		uint32_t st = __atomic_load_n(s->qp_state, __ATOMIC_ACQUIRE);

		if (st < SHIFT_QPS_INIT || st > SHIFT_QPS_SQD || srecv_refuses(s, wr)) {
			gate_leave(s->gate_busy);
			return -1;
		}
	}
	p = __atomic_load_n(s->posted, __ATOMIC_RELAXED);
	for (const struct ibv_recv_wr *w = wr; w; w = w->next, p++) {
		uint64_t slot = p & s->log_mask;
		uint32_t idx = *s->ring_head & mask;

		s->log[slot].wr_id = w->wr_id;
		if (w->num_sge)
			memcpy(&s->log_sge[slot * s->log_stride], w->sg_list, (size_t)w->num_sge * sizeof(*w->sg_list));
		s->log[slot].nsge = (uint32_t)w->num_sge;
		shift_rwqe_write(s->ring + ((size_t)idx << s->wqe_shift), s->max_gs, w);
		s->wrid[idx] = w->wr_id;
		*s->head += 1;
		*s->ring_head += 1;
		s->int_at[idx] = *s->internal;
	}
	/* The scatter lists before the counter that advertises them. */
	to_device_barrier();
	__atomic_store_n(&s->db[0], htobe32(*s->ring_head & 0xffff), __ATOMIC_RELEASE);
	__atomic_store_n(s->posted, p, __ATOMIC_RELEASE);
	gate_leave(s->gate_busy);
	return 0;
}

/*
 * SHIFT mode's poll_cq in C for the Default state: failover.CQ.Poll's fast path (the CQ's
 * gate taken from open to busy, the default CQ polled, each completion of a known QP
 * retired and a receive counted, the gate opened again) over the memory Go shares: the
 * default CQ's ring and consumer index (provider.CQ.SharePoll), the QPs' tables
 * (provider.QP.ShareSend, ShareRecv) and the failover QP's receive count. What the fast path
 * hands to the failover layer's classifier (an error completion, a completion of a QP it does
 * not know) is left in the ring for Go, which polls it next. TestSharedPollMatchesGo compares
 * it with the provider's Poll.
 */
#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "barrier.h"
#include "fast.h"
#include "spost.h"

int shift_sview_publish(struct shift_fast_ctx *c, struct shift_sview *v)
{
	uint32_t hi = (v->qpn >> SHIFT_QPT_SHIFT) & (SHIFT_QPT_SIZE - 1);
	struct shift_sview **t;

	pthread_mutex_lock(&c->lock);
	t = c->svt[hi];
	if (!t) {
		t = calloc(SHIFT_QPT_SIZE, sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&c->lock);
			return ENOMEM;
		}
		__atomic_store_n(&c->svt[hi], t, __ATOMIC_RELEASE);
	}
	/* The view's fields before the pointer a poller may load. */
	__atomic_store_n(&t[v->qpn & (SHIFT_QPT_SIZE - 1)], v, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* A view is unpublished once its QP is destroyed, when no completion of its QPN is left in
 * any ring (the provider's destroy cleaned them with the CQs' gates held), so no poller
 * looks it up afterwards; second-level tables stay until the context is freed. */
void shift_sview_unpublish(struct shift_fast_ctx *c, struct shift_sview *v)
{
	uint32_t hi = (v->qpn >> SHIFT_QPT_SHIFT) & (SHIFT_QPT_SIZE - 1);

	pthread_mutex_lock(&c->lock);
	if (c->svt[hi] && c->svt[hi][v->qpn & (SHIFT_QPT_SIZE - 1)] == v)
		__atomic_store_n(&c->svt[hi][v->qpn & (SHIFT_QPT_SIZE - 1)], NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&c->lock);
}

static inline struct shift_sview *sview_find(struct shift_fast_ctx *c, uint32_t qpn)
{
	struct shift_sview **t = __atomic_load_n(&c->svt[(qpn >> SHIFT_QPT_SHIFT) & (SHIFT_QPT_SIZE - 1)], __ATOMIC_ACQUIRE);

	return t ? __atomic_load_n(&t[qpn & (SHIFT_QPT_SIZE - 1)], __ATOMIC_ACQUIRE) : NULL;
}

/* sendQueue.retire: the WQE at wqe_counter and the unsignaled ones before it are done. The
 * wr_id is read before the new tail frees the slot to a poster on another thread. */
static uint64_t sview_retire_send(struct shift_spost *s, uint16_t wqe_counter)
{
	uint32_t idx = wqe_counter & (s->wqe_cnt - 1);
	uint64_t wr_id = s->wrid[idx];

	/* intRetired before retired: a poster that sees the new tail sees this. */
	__atomic_store_n(s->int_retired, s->int_at[idx], __ATOMIC_RELEASE);
	__atomic_store_n(s->retired, (uint64_t)(s->pos[idx] + s->nbb[idx]) << 32 | s->wqe_head[idx], __ATOMIC_RELEASE);
	return wr_id;
}

/* recvQueue.retire: one receive, in order. */
static uint64_t sview_retire_recv(struct shift_srecv *r, uint16_t wqe_counter)
{
	uint32_t idx = wqe_counter & (r->wqe_cnt - 1);
	uint64_t wr_id = r->wrid[idx];

	__atomic_store_n(r->int_retired, r->int_at[idx], __ATOMIC_RELEASE);
	__atomic_store_n(r->tail, __atomic_load_n(r->tail, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
	return wr_id;
}

int shift_spoll_cq(struct shift_fast_ctx *c, struct shift_spoll *p, int want, struct ibv_wc *wc)
{
	uint32_t open = SHIFT_GATE_OPEN;
	int got = 0;

	if (!__atomic_compare_exchange_n(p->gate, &open, SHIFT_GATE_BUSY, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return 0;
	while (got < want) {
		struct shift_cqr view = { .buf = p->buf, .ncqe = p->ncqe, .cons_index = *p->ci };
		struct shift_fwc w;
		struct shift_sview *v;
		struct ibv_wc *d = &wc[got];
		uint16_t ctr;
		int recv;

		if (!shift_cq_next(&view, &w, &ctr, &recv) || w.status != IBV_WC_SUCCESS)
			break;
		v = sview_find(c, w.qp_num);
		if (!v)
			break;
		/* Consumed: the CQE is this poller's. */
		*p->ci = view.cons_index;
		memset(d, 0, sizeof(*d));
		if (recv) {
			d->wr_id = sview_retire_recv(v->rq, ctr);
			*v->recv_done += 1;
		} else {
			d->wr_id = sview_retire_send(v->sq, ctr);
		}
		d->status = IBV_WC_SUCCESS;
		d->opcode = w.opcode;
		d->byte_len = w.byte_len;
		d->imm_data = w.imm;
		d->qp_num = w.qp_num;
		d->src_qp = w.src_qp;
		d->wc_flags = w.wc_flags & (IBV_WC_GRH | IBV_WC_WITH_IMM); /* the provider's verbs.WC flags */
		d->sl = w.sl;
		got++;
	}
	if (got)
		p->db[SHIFT_CQ_SET_CI] = htobe32(*p->ci & 0xffffff); /* CQ.UpdateCI */
	__atomic_store_n(p->gate, SHIFT_GATE_OPEN, __ATOMIC_RELEASE);
	return got;
}

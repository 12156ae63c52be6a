/*
 * The data path: post_send, post_recv and poll_cq. A QP or CQ whose rings Go handed to C
 * (plain mode) is served by fast.c without entering Go. The others (SHIFT mode, where every
 * post goes through the failover layer) serialise on their queue's lock (as libmlx5 does for
 * callers that share a QP or CQ between threads); a post or poll the failover layer's
 * Default state allows is done there by spost.c or spoll.c, and anything else is flattened into the QP's
 * preallocated records and posted through Go in one call, or polled through Go into the
 * CQ's buffer and converted to struct ibv_wc.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "plugin.h"
#include "_cgo_export.h"

int shift_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct shift_qp *qp = to_sqp(ibqp);
	struct ibv_send_wr *w;
	uint32_t n = 0;
	int err;

	if (shift_forked) {
		*bad = wr;
		return EPERM;
	}
	if (qp->fast && wr) {
		/* The provider's rule (canSend): sends only in RTS; libibverbs sets state after a
		 * successful modify_qp. */
		if (__atomic_load_n(&ibqp->state, __ATOMIC_RELAXED) != IBV_QPS_RTS) {
			*bad = wr;
			return EINVAL;
		}
		return shift_fast_post_send(qp->fast, wr, bad);
	}
	pthread_mutex_lock(&qp->sq_lock);
	if (qp->spost && shift_spost_send(qp->spost, wr) == 0) {
		pthread_mutex_unlock(&qp->sq_lock);
		return 0;
	}
	for (w = wr; w; w = w->next) {
		struct shift_swr *r;

		if (n == qp->max_send_wr) {
			/* Longer than the send queue: nothing of it can be posted. */
			pthread_mutex_unlock(&qp->sq_lock);
			*bad = wr;
			return ENOMEM;
		}
		r = &qp->swr[n++];
		r->wr_id = w->wr_id;
		r->sg_list = w->sg_list;
		r->num_sge = w->num_sge;
		r->opcode = w->opcode;
		r->send_flags = w->send_flags;
		r->imm = be32toh(w->imm_data);
		r->remote_addr = 0;
		r->rkey = 0;
		r->compare_add = 0;
		r->swap = 0;
		switch (w->opcode) {
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM:
		case IBV_WR_RDMA_READ:
			r->remote_addr = w->wr.rdma.remote_addr;
			r->rkey = w->wr.rdma.rkey;
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			r->remote_addr = w->wr.atomic.remote_addr;
			r->rkey = w->wr.atomic.rkey;
			r->compare_add = w->wr.atomic.compare_add;
			r->swap = w->wr.atomic.swap;
			break;
		default:
			break;
		}
	}
	err = n ? shiftGoPostSend(qp, n) : 0;
	pthread_mutex_unlock(&qp->sq_lock);
	if (err)
		*bad = wr; /* a rejected list was not posted at all */
	return err;
}

int shift_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct shift_qp *qp = to_sqp(ibqp);
	struct ibv_recv_wr *w;
	uint32_t n = 0;
	int err;

	if (shift_forked) {
		*bad = wr;
		return EPERM;
	}
	if (qp->fast && wr) {
		enum ibv_qp_state st = __atomic_load_n(&ibqp->state, __ATOMIC_RELAXED);

		/* canRecv: from INIT on, not in RESET or ERR. */
		if (st != IBV_QPS_INIT && st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) {
			*bad = wr;
			return EINVAL;
		}
		return shift_fast_post_recv(qp->fast, wr, bad);
	}
	pthread_mutex_lock(&qp->rq_lock);
	if (qp->srecv && shift_srecv_post(qp->srecv, wr) == 0) {
		pthread_mutex_unlock(&qp->rq_lock);
		return 0;
	}
	for (w = wr; w; w = w->next) {
		if (n == qp->max_recv_wr) {
			pthread_mutex_unlock(&qp->rq_lock);
			*bad = wr;
			return ENOMEM;
		}
		qp->rwr[n].wr_id = w->wr_id;
		qp->rwr[n].sg_list = w->sg_list;
		qp->rwr[n].num_sge = w->num_sge;
		n++;
	}
	err = n ? shiftGoPostRecv(qp, n) : 0;
	pthread_mutex_unlock(&qp->rq_lock);
	if (err)
		*bad = wr;
	return err;
}

int shift_poll_cq(struct ibv_cq *ibcq, int want, struct ibv_wc *wc)
{
	struct shift_cq *cq = to_scq(ibcq);
	int got = 0;

	if (shift_forked)
		return -1;
	if (want <= 0)
		return 0;
	if (cq->fast)
		return shift_cq_empty(cq->fast) ? 0 : shift_fast_poll(to_sctx(ibcq->context)->fast, cq->fast, want, wc);
	if (shift_peek_empty(&cq->peek))
		return 0; /* SHIFT's Default state with nothing waiting: no call into Go */
	pthread_mutex_lock(&cq->lock);
	if (cq->spoll) {
		/* SHIFT's Default state: what the failover layer's fast path returns, in C. */
		got = shift_spoll_cq(to_sctx(ibcq->context)->fast, cq->spoll, want, wc);
		if (got) {
			pthread_mutex_unlock(&cq->lock);
			return got;
		}
	}
	while (got < want) {
		int ask = want - got < cq->nwc ? want - got : cq->nwc;
		int n = shiftGoPollCQ(cq, ask);

		if (n < 0) {
			pthread_mutex_unlock(&cq->lock);
			return got ? got : n; /* libibverbs callers see a negative count as an error */
		}
		for (int i = 0; i < n; i++) {
			const struct shift_wc *s = &cq->wc[i];
			struct ibv_wc *d = &wc[got + i];

			memset(d, 0, sizeof(*d));
			d->wr_id = s->wr_id;
			d->status = s->status;
			d->opcode = s->opcode;
			d->vendor_err = s->vendor_err;
			d->byte_len = s->byte_len;
			d->imm_data = htobe32(s->imm);
			d->qp_num = s->qp_num;
			d->src_qp = s->src_qp;
			d->wc_flags = s->wc_flags;
			d->sl = s->sl;
		}
		got += n;
		if (n < ask)
			break;
	}
	pthread_mutex_unlock(&cq->lock);
	return got;
}

/*
 * The control verbs: C wrappers that allocate the libibverbs-visible object, fill what
 * libibverbs expects a provider to fill, and hand the work to Go. Each returns errno values
 * the way libibverbs' entry points pass them on (a pointer op returns NULL with errno set).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "_cgo_export.h"

#define FORK_GUARD(ret)                                                                            \
	do {                                                                                       \
		if (shift_forked) {                                                                \
			errno = EPERM;                                                             \
			return ret;                                                                \
		}                                                                                  \
	} while (0)

static int shift_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *input,
				 struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex a;
	int err;

	FORK_GUARD(EPERM);
	if (input && input->comp_mask)
		return EINVAL;
	if (attr_size < sizeof(attr->orig_attr))
		return EINVAL;
	memset(&a, 0, sizeof(a));
	err = shiftGoQueryDevice(to_sctx(c), &a);
	if (err)
		return err;
	/* Callers built against an older verbs.h pass a smaller struct: fill what they have. */
	memcpy(attr, &a, attr_size < sizeof(a) ? attr_size : sizeof(a));
	return 0;
}

static int shift_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *attr)
{
	FORK_GUARD(EPERM);
	memset(attr, 0, sizeof(*attr));
	return shiftGoQueryPort(to_sctx(c), port, attr);
}

static struct ibv_pd *shift_alloc_pd(struct ibv_context *c)
{
	struct shift_pd *pd;
	int err;

	FORK_GUARD(NULL);
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	err = shiftGoAllocPD(to_sctx(c), pd);
	if (err) {
		free(pd);
		errno = err;
		return NULL;
	}
	pd->pd.context = c;
	return &pd->pd;
}

static int shift_dealloc_pd(struct ibv_pd *ibpd)
{
	struct shift_pd *pd = (struct shift_pd *)ibpd;
	int err;

	FORK_GUARD(EPERM);
	err = shiftGoDeallocPD(pd);
	if (!err)
		free(pd);
	return err;
}

static struct ibv_mr *shift_reg_mr(struct ibv_pd *ibpd, void *addr, size_t length, uint64_t hca_va, int access)
{
	struct shift_mr *mr;
	int err;

	FORK_GUARD(NULL);
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	err = shiftGoRegMR((struct shift_pd *)ibpd, mr, addr, length, hca_va, access);
	if (err) {
		free(mr);
		errno = err;
		return NULL;
	}
	mr->vmr.ibv_mr.context = ibpd->context;
	mr->vmr.ibv_mr.pd = ibpd;
	mr->vmr.ibv_mr.addr = addr;
	mr->vmr.ibv_mr.length = length;
	mr->vmr.mr_type = SHIFT_MR_TYPE_MR;
	mr->vmr.access = access;
	return &mr->vmr.ibv_mr;
}

static int shift_dereg_mr(struct verbs_mr *vmr)
{
	struct shift_mr *mr = (struct shift_mr *)vmr;
	int err;

	FORK_GUARD(EPERM);
	err = shiftGoDeregMR(mr);
	if (!err)
		free(mr);
	return err;
}

static struct ibv_cq *shift_create_cq(struct ibv_context *c, int cqe, struct ibv_comp_channel *channel, int vector)
{
	struct shift_cq *cq;
	int err, size = 0;

	FORK_GUARD(NULL);
	if (cqe < 1) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	cq->nwc = 64;
	cq->wc = calloc(cq->nwc, sizeof(*cq->wc));
	if (!cq->wc) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&cq->lock, NULL);
	err = shiftGoCreateCQ(to_sctx(c), cq, cqe, channel, vector, &size);
	if (err) {
		pthread_mutex_destroy(&cq->lock);
		free(cq->wc);
		free(cq);
		errno = err;
		return NULL;
	}
	/* libibverbs' ibv_create_cq fills context, channel and cq_context (verbs_init_cq). */
	cq->vcq.cq.cqe = size;
	return &cq->vcq.cq;
}

static int shift_destroy_cq(struct ibv_cq *ibcq)
{
	struct shift_cq *cq = to_scq(ibcq);
	int err;

	FORK_GUARD(EPERM);
	err = shiftGoDestroyCQ(cq);
	if (err)
		return err;
	shift_fast_cq_free(cq->fast);
	pthread_mutex_destroy(&cq->lock);
	free(cq->wc);
	free(cq);
	return 0;
}

static int shift_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct shift_cq *cq = to_scq(ibcq);

	FORK_GUARD(EPERM);
	if (cq->fast) {
		if (!ibcq->channel)
			return EINVAL; /* no channel to deliver the event on */
		shift_cq_arm(cq->fast, solicited_only);
		return 0;
	}
	return shiftGoArmCQ(cq, solicited_only);
}

static void shift_cq_event(struct ibv_cq *ibcq)
{
	struct shift_cq *cq = to_scq(ibcq);

	if (shift_forked)
		return;
	if (cq->fast)
		__atomic_add_fetch(&cq->fast->arm_sn, 1, __ATOMIC_RELAXED); /* mlx5_cq_event */
	else
		shiftGoCQEvent(cq);
}

/* fast_cqs_lock takes the C-polled CQs of a QP in address order (mlx5_lock_cqs). */
static void fast_cqs_lock(struct shift_cqr *a, struct shift_cqr *b)
{
	if (a == b || !b) {
		shift_lock(&a->lock);
	} else if (a < b) {
		shift_lock(&a->lock);
		shift_lock(&b->lock);
	} else {
		shift_lock(&b->lock);
		shift_lock(&a->lock);
	}
}

static void fast_cqs_unlock(struct shift_cqr *a, struct shift_cqr *b)
{
	shift_unlock(&a->lock);
	if (b && b != a)
		shift_unlock(&b->lock);
}

/* fast_qp_clean drops the QP's unpolled CQEs from its CQs and forgets it as their last QP
 * (__mlx5_cq_clean at RESET and destroy); both CQ locks held. */
static void fast_qp_clean(struct shift_qp *qp, struct shift_cqr *scq, struct shift_cqr *rcq)
{
	shift_cq_clean(rcq, qp->fast->qpn);
	if (rcq->last == qp->fast)
		rcq->last = NULL;
	if (scq != rcq) {
		shift_cq_clean(scq, qp->fast->qpn);
		if (scq->last == qp->fast)
			scq->last = NULL;
	}
}

static void qp_free(struct shift_qp *qp)
{
	shift_qp_ex_free(qp);
	pthread_mutex_destroy(&qp->sq_lock);
	pthread_mutex_destroy(&qp->rq_lock);
	free(qp->swr);
	free(qp->rwr);
	free(qp->spost);
	free(qp->srecv);
	free(qp);
}

/* qp_create is create_qp and create_qp_ex: the QP through Go, then the ibv_qp fields
 * libibverbs leaves to the provider (ibv_create_qp fills nothing) and the caps written back
 * as libmlx5 does. */
static struct ibv_qp *qp_create(struct ibv_context *c, struct ibv_pd *pd, struct ibv_qp_init_attr *attr,
				const struct ibv_qp_init_attr_ex *ex)
{
	struct shift_qp *qp;
	uint32_t qpn = 0;
	int err;

	if (shift_qp_type_refused(attr)) /* RC without SRQ is what this provider offers */
		return NULL;
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&qp->sq_lock, NULL);
	pthread_mutex_init(&qp->rq_lock, NULL);
	err = shiftGoCreateQP((struct shift_pd *)pd, qp, attr, &qpn);
	if (err) {
		qp_free(qp);
		errno = err;
		return NULL;
	}
	qp->sq_sig_all = attr->sq_sig_all;
	qp->max_send_wr = attr->cap.max_send_wr;
	qp->max_recv_wr = attr->cap.max_recv_wr;
	qp->swr = calloc(qp->max_send_wr ? qp->max_send_wr : 1, sizeof(*qp->swr));
	qp->rwr = calloc(qp->max_recv_wr ? qp->max_recv_wr : 1, sizeof(*qp->rwr));
	if (!qp->swr || !qp->rwr) {
		shiftGoDestroyQP(qp);
		qp_free(qp);
		errno = ENOMEM;
		return NULL;
	}
	qp->vqp.qp.context = c;
	qp->vqp.qp.qp_num = qpn;
	qp->vqp.qp.qp_context = attr->qp_context;
	qp->vqp.qp.pd = pd;
	qp->vqp.qp.send_cq = attr->send_cq;
	qp->vqp.qp.recv_cq = attr->recv_cq;
	qp->vqp.qp.state = IBV_QPS_RESET;
	qp->vqp.qp.qp_type = attr->qp_type;
	pthread_mutex_init(&qp->vqp.qp.mutex, NULL);
	pthread_cond_init(&qp->vqp.qp.cond, NULL);
	if (ex && (ex->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
		shift_qp_ex_init(qp, &attr->cap);
		if (!qp->wb.wrs) {
			shiftGoDestroyQP(qp);
			qp_free(qp);
			errno = ENOMEM;
			return NULL;
		}
		qp->vqp.comp_mask |= SHIFT_VERBS_QP_EX;
	}
	return &qp->vqp.qp;
}

static struct ibv_qp *shift_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	FORK_GUARD(NULL);
	return qp_create(pd->context, pd, attr, NULL);
}

/* The send operations the ibv_qp_ex builder implements (wr_ex.c). */
#define SHIFT_QP_EX_OPS                                                                            \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |    \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

static struct ibv_qp *shift_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *ex)
{
	static int once;
	struct ibv_qp_init_attr attr;
	struct ibv_qp *qp;

	FORK_GUARD(NULL);
	if (!(ex->comp_mask & IBV_QP_INIT_ATTR_PD) ||
	    (ex->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
					 IBV_QP_INIT_ATTR_CREATE_FLAGS)) ||
	    ((ex->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && ex->create_flags) ||
	    ((ex->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (ex->send_ops_flags & ~(uint64_t)SHIFT_QP_EX_OPS))) {
		shift_refuse(&once, "create_qp_ex",
			     "only a PD, no create flags and the RC send ops (ibv_wr_send, _imm, rdma_write, _imm, rdma_read, atomics) are offered");
		return NULL;
	}
	memset(&attr, 0, sizeof(attr));
	attr.qp_context = ex->qp_context;
	attr.send_cq = ex->send_cq;
	attr.recv_cq = ex->recv_cq;
	attr.srq = ex->srq;
	attr.cap = ex->cap;
	attr.qp_type = ex->qp_type;
	attr.sq_sig_all = ex->sq_sig_all;
	qp = qp_create(c, ex->pd, &attr, ex);
	if (qp)
		ex->cap = attr.cap;
	return qp;
}

static int shift_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct shift_qp *qp = to_sqp(ibqp);
	int err;

	FORK_GUARD(EPERM);
	err = shiftGoModifyQP(qp, attr, mask);
	if (err)
		return err;
	if (qp->fast && (mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET) {
		/* What mlx5_modify_qp does after the kernel moved the QP to RESET. */
		struct shift_cqr *scq = to_scq(ibqp->send_cq)->fast, *rcq = to_scq(ibqp->recv_cq)->fast;

		fast_cqs_lock(scq, rcq);
		fast_qp_clean(qp, scq, rcq);
		shift_lock(&qp->fast->sq.lock);
		shift_lock(&qp->fast->rq.lock);
		shift_fast_qp_reset(qp->fast);
		shift_unlock(&qp->fast->rq.lock);
		shift_unlock(&qp->fast->sq.lock);
		fast_cqs_unlock(scq, rcq);
	}
	return 0;
}

static int shift_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init)
{
	int err;

	FORK_GUARD(EPERM);
	memset(attr, 0, sizeof(*attr));
	err = shiftGoQueryQP(to_sqp(ibqp), attr, mask);
	if (err)
		return err;
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = ibqp->qp_context;
		init->send_cq = ibqp->send_cq;
		init->recv_cq = ibqp->recv_cq;
		init->srq = ibqp->srq;
		init->cap = attr->cap;
		init->qp_type = ibqp->qp_type;
		init->sq_sig_all = to_sqp(ibqp)->sq_sig_all;
	}
	ibqp->state = attr->qp_state;
	return 0;
}

static int shift_destroy_qp(struct ibv_qp *ibqp)
{
	struct shift_qp *qp = to_sqp(ibqp);
	int err;

	FORK_GUARD(EPERM);
	err = shiftGoDestroyQP(qp);
	if (err)
		return err;
	if (qp->fast) {
		/* After the kernel destroyed it, as mlx5_destroy_qp: no CQE of it is left to poll and
		 * no poller can find it once the CQ locks are dropped. */
		struct shift_cqr *scq = to_scq(ibqp->send_cq)->fast, *rcq = to_scq(ibqp->recv_cq)->fast;

		fast_cqs_lock(scq, rcq);
		fast_qp_clean(qp, scq, rcq);
		shift_fast_qp_unpublish(to_sctx(ibqp->context)->fast, qp->fast);
		fast_cqs_unlock(scq, rcq);
		shift_fast_qp_free(qp->fast);
	}
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_cond_destroy(&ibqp->cond);
	qp_free(qp);
	return 0;
}

static int shift_no_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	return EOPNOTSUPP;
}

static void shift_async_event(struct ibv_context *c, struct ibv_async_event *ev)
{
	(void)c;
	(void)ev; /* nothing to update: the element is the object the application holds */
}

/* ops_data.c */
int shift_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int shift_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);

const struct verbs_context_ops shift_ctx_ops = {
	.alloc_mw = shift_alloc_mw,
	.alloc_pd = shift_alloc_pd,
	.async_event = shift_async_event,
	.cq_event = shift_cq_event,
	.create_cq = shift_create_cq,
	.create_cq_ex = shift_create_cq_ex,
	.create_qp = shift_create_qp,
	.create_qp_ex = shift_create_qp_ex,
	.create_srq = shift_create_srq,
	.create_srq_ex = shift_create_srq_ex,
	.dealloc_pd = shift_dealloc_pd,
	.dereg_mr = shift_dereg_mr,
	.free_context = shift_free_context,
	.destroy_cq = shift_destroy_cq,
	.destroy_qp = shift_destroy_qp,
	.modify_qp = shift_modify_qp,
	.open_xrcd = shift_open_xrcd,
	.poll_cq = shift_poll_cq,
	.post_recv = shift_post_recv,
	.post_send = shift_post_send,
	.query_device_ex = shift_query_device_ex,
	.query_ece = shift_no_ece,
	.query_port = shift_query_port,
	.query_qp = shift_query_qp,
	.reg_mr = shift_reg_mr,
	.req_notify_cq = shift_req_notify_cq,
	.resize_cq = shift_resize_cq,
	.set_ece = shift_no_ece,
};

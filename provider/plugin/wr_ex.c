/*
 * The ibv_qp_ex work-request API (ibv_wr_start ... ibv_wr_complete), which perftest uses on a
 * ConnectX part id and rc_pingpong with -N. The builder gathers the WRs as ibv_send_wr records
 * and wr_complete posts them as one list through shift_post_send, so both APIs share one
 * post path. Errors met while building are kept and returned by wr_complete, as libmlx5 does.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

static struct shift_qp *qpx_to_sqp(struct ibv_qp_ex *qpx)
{
	return to_sqp(&qpx->qp_base);
}

static struct ibv_send_wr *next_wr(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op)
{
	struct shift_wr_builder *b = &qpx_to_sqp(qpx)->wb;
	struct ibv_send_wr *w;

	if (b->n == b->max_wr) {
		if (!b->err)
			b->err = ENOMEM;
		return NULL;
	}
	w = &b->wrs[b->n++];
	memset(w, 0, sizeof(*w));
	w->wr_id = qpx->wr_id;
	w->send_flags = qpx->wr_flags;
	w->opcode = op;
	return w;
}

/* cur is the WR the wr_set_* calls apply to: the last one started. */
static struct ibv_send_wr *cur_wr(struct shift_wr_builder *b)
{
	if (b->n == 0) {
		if (!b->err)
			b->err = EINVAL;
		return NULL;
	}
	return &b->wrs[b->n - 1];
}

static void wr_start(struct ibv_qp_ex *qpx)
{
	struct shift_wr_builder *b = &qpx_to_sqp(qpx)->wb;

	pthread_mutex_lock(&b->lock);
	b->n = 0;
	b->err = 0;
}

static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct shift_qp *qp = qpx_to_sqp(qpx);
	struct shift_wr_builder *b = &qp->wb;
	struct ibv_send_wr *bad;
	int err = b->err;

	if (!err && b->n) {
		for (uint32_t i = 0; i + 1 < b->n; i++)
			b->wrs[i].next = &b->wrs[i + 1];
		b->wrs[b->n - 1].next = NULL;
		err = shift_post_send(&qp->vqp.qp, b->wrs, &bad);
	}
	b->n = 0;
	b->err = 0;
	pthread_mutex_unlock(&b->lock);
	return err;
}

static void wr_abort(struct ibv_qp_ex *qpx)
{
	struct shift_wr_builder *b = &qpx_to_sqp(qpx)->wb;

	b->n = 0;
	b->err = 0;
	pthread_mutex_unlock(&b->lock);
}

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr)
{
	struct ibv_send_wr *w = next_wr(qpx, IBV_WR_RDMA_WRITE);

	if (w) {
		w->wr.rdma.rkey = rkey;
		w->wr.rdma.remote_addr = raddr;
	}
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr, __be32 imm)
{
	struct ibv_send_wr *w = next_wr(qpx, IBV_WR_RDMA_WRITE_WITH_IMM);

	if (w) {
		w->wr.rdma.rkey = rkey;
		w->wr.rdma.remote_addr = raddr;
		w->imm_data = imm;
	}
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr)
{
	struct ibv_send_wr *w = next_wr(qpx, IBV_WR_RDMA_READ);

	if (w) {
		w->wr.rdma.rkey = rkey;
		w->wr.rdma.remote_addr = raddr;
	}
}

static void wr_send(struct ibv_qp_ex *qpx)
{
	next_wr(qpx, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
	struct ibv_send_wr *w = next_wr(qpx, IBV_WR_SEND_WITH_IMM);

	if (w)
		w->imm_data = imm;
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr, uint64_t compare, uint64_t swap)
{
	struct ibv_send_wr *w = next_wr(qpx, IBV_WR_ATOMIC_CMP_AND_SWP);

	if (w) {
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.remote_addr = raddr;
		w->wr.atomic.compare_add = compare;
		w->wr.atomic.swap = swap;
	}
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr, uint64_t add)
{
	struct ibv_send_wr *w = next_wr(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD);

	if (w) {
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.remote_addr = raddr;
		w->wr.atomic.compare_add = add;
	}
}

static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct shift_wr_builder *b = &qpx_to_sqp(qpx)->wb;
	struct ibv_send_wr *w = cur_wr(b);

	if (!w)
		return;
	w->sg_list = &b->sges[(size_t)(w - b->wrs) * b->max_sge];
	w->sg_list[0] = (struct ibv_sge){ .addr = addr, .length = length, .lkey = lkey };
	w->num_sge = 1;
}

static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num, const struct ibv_sge *list)
{
	struct shift_wr_builder *b = &qpx_to_sqp(qpx)->wb;
	struct ibv_send_wr *w = cur_wr(b);

	if (!w)
		return;
	if (num > b->max_sge) {
		if (!b->err)
			b->err = EINVAL;
		return;
	}
	w->sg_list = &b->sges[(size_t)(w - b->wrs) * b->max_sge];
	memcpy(w->sg_list, list, num * sizeof(*list));
	w->num_sge = (int)num;
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num, const struct ibv_data_buf *bufs)
{
	struct shift_wr_builder *b = &qpx_to_sqp(qpx)->wb;
	struct ibv_send_wr *w = cur_wr(b);
	size_t len = 0;
	uint8_t *dst;

	if (!w)
		return;
	for (size_t i = 0; i < num; i++)
		len += bufs[i].length;
	if (len > b->max_inline) {
		if (!b->err)
			b->err = ENOMEM;
		return;
	}
	/* The caller may reuse its buffers once the call returns: copy now, as libmlx5 copies
	 * into the WQE. */
	dst = b->inl + (size_t)(w - b->wrs) * b->max_inline;
	len = 0;
	for (size_t i = 0; i < num; i++) {
		memcpy(dst + len, bufs[i].addr, bufs[i].length);
		len += bufs[i].length;
	}
	w->sg_list = &b->sges[(size_t)(w - b->wrs) * b->max_sge];
	w->sg_list[0] = (struct ibv_sge){ .addr = (uintptr_t)dst, .length = (uint32_t)len, .lkey = 0 };
	w->num_sge = 1;
	w->send_flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	wr_set_inline_data_list(qpx, 1, &buf);
}

/* Operations an RC provider without memory windows, UD or XRC does not offer. */
static void wr_unsupported(struct shift_wr_builder *b)
{
	if (!b->err)
		b->err = EOPNOTSUPP;
}

static void wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	(void)mw, (void)rkey, (void)info;
	wr_unsupported(&qpx_to_sqp(qpx)->wb);
}

static void wr_local_inv(struct ibv_qp_ex *qpx, uint32_t rkey)
{
	(void)rkey;
	wr_unsupported(&qpx_to_sqp(qpx)->wb);
}

static void wr_send_inv(struct ibv_qp_ex *qpx, uint32_t rkey)
{
	(void)rkey;
	wr_unsupported(&qpx_to_sqp(qpx)->wb);
}

static void wr_send_tso(struct ibv_qp_ex *qpx, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	(void)hdr, (void)hdr_sz, (void)mss;
	wr_unsupported(&qpx_to_sqp(qpx)->wb);
}

static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	(void)ah, (void)qpn, (void)qkey;
	wr_unsupported(&qpx_to_sqp(qpx)->wb);
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t srqn)
{
	(void)srqn;
	wr_unsupported(&qpx_to_sqp(qpx)->wb);
}

static void wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr, const void *data)
{
	(void)rkey, (void)raddr, (void)data;
	wr_unsupported(&qpx_to_sqp(qpx)->wb);
}

void shift_qp_ex_init(struct shift_qp *qp, const struct ibv_qp_cap *cap)
{
	struct shift_wr_builder *b = &qp->wb;
	struct ibv_qp_ex *x = &qp->vqp.qp_ex;

	b->max_wr = cap->max_send_wr ? cap->max_send_wr : 1;
	b->max_sge = cap->max_send_sge ? cap->max_send_sge : 1;
	b->max_inline = cap->max_inline_data;
	b->wrs = calloc(b->max_wr, sizeof(*b->wrs));
	b->sges = calloc((size_t)b->max_wr * b->max_sge, sizeof(*b->sges));
	b->inl = b->max_inline ? malloc((size_t)b->max_wr * b->max_inline) : NULL;
	if (!b->wrs || !b->sges || (b->max_inline && !b->inl)) {
		shift_qp_ex_free(qp); /* qp_create sees wrs == NULL and fails with ENOMEM */
		return;
	}
	pthread_mutex_init(&b->lock, NULL);
	b->live = 1;
	x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	x->wr_atomic_fetch_add = wr_atomic_fetch_add;
	x->wr_bind_mw = wr_bind_mw;
	x->wr_local_inv = wr_local_inv;
	x->wr_rdma_read = wr_rdma_read;
	x->wr_rdma_write = wr_rdma_write;
	x->wr_rdma_write_imm = wr_rdma_write_imm;
	x->wr_send = wr_send;
	x->wr_send_imm = wr_send_imm;
	x->wr_send_inv = wr_send_inv;
	x->wr_send_tso = wr_send_tso;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_xrc_srqn = wr_set_xrc_srqn;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	x->wr_atomic_write = wr_atomic_write;
}

void shift_qp_ex_free(struct shift_qp *qp)
{
	struct shift_wr_builder *b = &qp->wb;

	if (b->live)
		pthread_mutex_destroy(&b->lock);
	b->live = 0;
	free(b->wrs);
	free(b->sges);
	free(b->inl);
	b->wrs = NULL;
	b->sges = NULL;
	b->inl = NULL;
}

/*
 * The C data path over Go-created rings: see fast.h. Each function mirrors one of package
 * provider's (sendQueue.validate/write/record, QP.ringSQ, recvQueue, cqRing.poll, CQ.armCQ,
 * cqRing.clean), and the bytes written to and read from the rings are compared with package
 * mlx5's by fast_test.go.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fast.h"

#include "barrier.h"

static const uint8_t wr_to_mlx5[] = {
	[IBV_WR_RDMA_WRITE] = MLX5_OPCODE_RDMA_WRITE,
	[IBV_WR_RDMA_WRITE_WITH_IMM] = MLX5_OPCODE_RDMA_WRITE_IMM,
	[IBV_WR_SEND] = MLX5_OPCODE_SEND,
	[IBV_WR_SEND_WITH_IMM] = MLX5_OPCODE_SEND_IMM,
	[IBV_WR_RDMA_READ] = MLX5_OPCODE_RDMA_READ,
	[IBV_WR_ATOMIC_CMP_AND_SWP] = MLX5_OPCODE_ATOMIC_CS,
	[IBV_WR_ATOMIC_FETCH_AND_ADD] = MLX5_OPCODE_ATOMIC_FA,
};

static inline int inlineable(enum ibv_wr_opcode op)
{
	return op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_SEND ||
	       op == IBV_WR_SEND_WITH_IMM;
}

/* Validates a whole list before anything is written, as the provider does (libmlx5 posts the
 * prefix before a bad WR; this data path, like the Go one, posts nothing). */
int shift_wr_check(const struct ibv_send_wr *w, uint32_t max_gs, uint32_t max_inline)
{
	if ((unsigned)w->opcode >= sizeof(wr_to_mlx5) || w->num_sge < 0 || (uint32_t)w->num_sge > max_gs)
		return EINVAL;
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		if (w->num_sge != 1 || w->sg_list[0].length != 8)
			return EINVAL;
	} else if ((w->send_flags & IBV_SEND_INLINE) && inlineable(w->opcode)) {
		uint64_t len = 0;

		for (int i = 0; i < w->num_sge; i++)
			len += w->sg_list[i].length;
		if (len > max_inline)
			return ENOMEM;
	}
	return 0;
}

int shift_sq_validate(const struct shift_sq *sq, const struct ibv_send_wr *wr)
{
	uint32_t outstanding = sq->head - __atomic_load_n(&sq->tail, __ATOMIC_ACQUIRE);
	uint32_t n = 0;

	for (const struct ibv_send_wr *w = wr; w; w = w->next) {
		int err = shift_wr_check(w, sq->max_gs, sq->max_inline);

		if (err)
			return err;
		n++;
	}
	if (outstanding + n > sq->max_post)
		return ENOMEM;
	return 0;
}

/* A WQE being built: offsets into the ring, which is a power of two of 64-byte blocks, so a
 * 16-byte segment never straddles its end. */
struct wqe_b {
	uint8_t *buf;
	uint32_t size; /* bytes */
	uint32_t start, off, ds;
	int32_t inl_off;
	uint32_t inl_len;
};

/* put16 appends a 16-byte segment as two big-endian 8-byte stores (FastWQE.put16): the
 * BlueFlame copy reads the WQE back 8 bytes at a time, and a load that spans two narrower
 * stores cannot be forwarded from them, which costs more than the rest of the post. */
static inline void put16(struct wqe_b *b, uint64_t hi, uint64_t lo)
{
	uint64_t v[2] = { htobe64(hi), htobe64(lo) };

	b->off &= b->size - 1;
	memcpy(b->buf + b->off, v, sizeof(v));
	b->off += 16;
	b->ds++;
}

static inline void put_inline(struct wqe_b *b, const void *p, uint32_t len)
{
	uint32_t pos, n;

	if (b->inl_off < 0) {
		if (b->off == b->size)
			b->off = 0;
		b->inl_off = (int32_t)b->off;
	}
	pos = b->inl_off + sizeof(struct mlx5_wqe_inl_data_seg) + b->inl_len;
	if (pos >= b->size)
		pos -= b->size;
	n = b->size - pos < len ? b->size - pos : len;
	memcpy(b->buf + pos, p, n);
	if (n < len)
		memcpy(b->buf, (const uint8_t *)p + n, len - n);
	b->inl_len += len;
}

static inline void close_inline(struct wqe_b *b)
{
	if (b->inl_len) {
		struct mlx5_wqe_inl_data_seg *h = (void *)(b->buf + b->inl_off);
		uint32_t units = (b->inl_len + sizeof(*h) + 15) / 16;

		h->byte_count = htobe32(b->inl_len | MLX5_INLINE_SEG);
		b->ds += units;
		b->off = b->inl_off + units * 16;
		if (b->off > b->size)
			b->off -= b->size;
	}
	b->inl_off = -1;
	b->inl_len = 0;
}

uint32_t shift_wqe_encode(uint8_t *ring, uint32_t wqe_cnt, uint32_t cur, uint32_t qpn, uint8_t ce,
			  const struct ibv_send_wr *w, int *ds, int *inl)
{
	struct wqe_b b = { .buf = ring, .size = wqe_cnt * MLX5_SEND_WQE_BB, .inl_off = -1 };
	uint8_t fm = ce;
	__be32 imm = 0;

	if (w->send_flags & IBV_SEND_FENCE)
		fm = ce | MLX5_WQE_CTRL_FENCE;
	if (w->send_flags & IBV_SEND_SIGNALED)
		fm |= MLX5_WQE_CTRL_CQ_UPDATE;
	if (w->send_flags & IBV_SEND_SOLICITED)
		fm |= MLX5_WQE_CTRL_SOLICITED;
	b.start = (cur & (wqe_cnt - 1)) * MLX5_SEND_WQE_BB;
	b.off = b.start + sizeof(struct mlx5_wqe_ctrl_seg);
	b.ds = 1;
	/* struct mlx5_wqe_raddr_seg (raddr, rkey, reserved 0) and struct mlx5_wqe_atomic_seg
	 * (swap_add, compare). */
	switch (w->opcode) {
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		imm = w->imm_data;
		/* fall through */
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_READ:
		put16(&b, w->wr.rdma.remote_addr, (uint64_t)w->wr.rdma.rkey << 32);
		break;
	case IBV_WR_SEND_WITH_IMM:
		imm = w->imm_data;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		put16(&b, w->wr.atomic.remote_addr, (uint64_t)w->wr.atomic.rkey << 32);
		put16(&b, w->wr.atomic.swap, w->wr.atomic.compare_add);
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		put16(&b, w->wr.atomic.remote_addr, (uint64_t)w->wr.atomic.rkey << 32);
		put16(&b, w->wr.atomic.compare_add, 0);
		break;
	default:
		break;
	}
	*inl = 0;
	if ((w->send_flags & IBV_SEND_INLINE) && inlineable(w->opcode)) {
		for (int i = 0; i < w->num_sge; i++) {
			if (w->sg_list[i].length) {
				put_inline(&b, (const void *)(uintptr_t)w->sg_list[i].addr, w->sg_list[i].length);
				*inl = 1;
			}
		}
		close_inline(&b);
	} else {
		/* struct mlx5_wqe_data_seg: byte_count, lkey, addr. */
		for (int i = 0; i < w->num_sge; i++) {
			const struct ibv_sge *g = &w->sg_list[i];

			if (g->length) /* a zero byte_count means 2 GiB to the device */
				put16(&b, (uint64_t)g->length << 32 | g->lkey, g->addr);
		}
	}
	{
		/* The control segment as two 8-byte stores, as package mlx5's FastWQE writes it
		 * (struct mlx5_wqe_ctrl_seg is packed; its fields are written through words). */
		uint64_t words[2] = {
			htobe64((uint64_t)(((cur & 0xffff) << 8) | wr_to_mlx5[w->opcode]) << 32 |
				((qpn & 0xffffff) << 8 | (b.ds & 0xff))),
			/* signature 0, dci_stream_channel_id 0, fm_ce_se; imm is big-endian already */
			htobe64((uint64_t)fm << 32) | (uint64_t)imm << 32,
		};

		memcpy(ring + b.start, words, sizeof(words));
	}
	*ds = (int)b.ds;
	return (b.ds * 16 + MLX5_SEND_WQE_BB - 1) / MLX5_SEND_WQE_BB;
}

uint8_t *shift_sq_write(struct shift_sq *sq, const struct ibv_send_wr *wr, int *nreq, int *ds, int *inl)
{
	uint8_t *last = NULL;
	uint8_t ce = sq->sig_all ? MLX5_WQE_CTRL_CQ_UPDATE : 0;
	int n = 0;

	for (const struct ibv_send_wr *w = wr; w; w = w->next, n++) {
		uint32_t cur = sq->cur_post, idx = cur & (sq->wqe_cnt - 1);
		uint32_t bbs = shift_wqe_encode(sq->buf, sq->wqe_cnt, cur, sq->qpn, ce, w, ds, inl);

		last = sq->buf + (size_t)idx * MLX5_SEND_WQE_BB;
		sq->head++;
		sq->wrid[idx] = w->wr_id;
		sq->wqe_head[idx] = sq->head;
		sq->cur_post = cur + bbs;
	}
	*nreq = n;
	return last;
}

void shift_bf_write(volatile uint64_t *dst, const uint8_t *ring, uint32_t wqe_cnt, const uint8_t *ctrl, int ds, int bf)
{
	uint64_t v;

	if (bf) {
		/* BlueFlame: whole 64-byte blocks, 8 bytes at a time in order, wrapping at the end
		 * of the ring (mlx5_bf_copy). */
		uint32_t n = ((uint32_t)ds * 16 + 63) & ~63u;
		const uint8_t *end = ring + (size_t)wqe_cnt * MLX5_SEND_WQE_BB;
		const uint8_t *src = ctrl;

		for (uint32_t i = 0; i < n / 8; i++, src += 8) {
			if (src == end)
				src = ring;
			memcpy(&v, src, sizeof(v));
			dst[i] = v;
		}
		return;
	}
	memcpy(&v, ctrl, sizeof(v));
	*dst = v;
}

/* post_send_db: barrier, doorbell record, write-combining start, BlueFlame copy of a single
 * small inline WQE or the 8-byte doorbell, flush, alternate halves. */
void shift_sq_ring(struct shift_sq *sq, int nreq, const uint8_t *ctrl, int ds, int inl)
{
	struct shift_bf *bf = sq->bf;
	volatile uint64_t *dst;

	if (!nreq)
		return;
	/* WQE stores before the record that advertises them. */
	to_device_barrier();
	sq->db[MLX5_SND_DBR] = htobe32(sq->cur_post & 0xffff);
	if (bf->need_lock)
		pthread_spin_lock(&bf->lock);
	/* mmio_wc_start: the record globally visible before the device write. */
	flush_writes();
	dst = (volatile uint64_t *)(bf->reg + bf->offset);
	shift_bf_write(dst, sq->buf, sq->wqe_cnt, ctrl, ds,
		       nreq == 1 && bf->index && inl && ds > 1 && (uint32_t)ds <= bf->buf_size / 16);
	/* Flush inside the lock: another CPU's doorbell must not overtake ours. */
	flush_writes();
	bf->offset ^= bf->buf_size;
	if (bf->need_lock)
		pthread_spin_unlock(&bf->lock);
}

void shift_rwqe_write(uint8_t *wqe, uint32_t stride_gs, const struct ibv_recv_wr *w)
{
	struct mlx5_wqe_data_seg *d = (void *)wqe;
	uint32_t j = 0;

	for (int i = 0; i < w->num_sge; i++) {
		if (!w->sg_list[i].length) /* skipped, as rdma-core does */
			continue;
		d[j].byte_count = htobe32(w->sg_list[i].length);
		d[j].lkey = htobe32(w->sg_list[i].lkey);
		d[j].addr = htobe64(w->sg_list[i].addr);
		j++;
	}
	if (j < stride_gs) {
		d[j].byte_count = 0;
		d[j].lkey = htobe32(MLX5_INVALID_LKEY);
		d[j].addr = 0;
	}
}

int shift_rq_post(struct shift_rq *rq, const struct ibv_recv_wr *wr)
{
	uint32_t outstanding = rq->head - __atomic_load_n(&rq->tail, __ATOMIC_ACQUIRE), n = 0;
	uint32_t stride_gs = (1u << rq->wqe_shift) / sizeof(struct mlx5_wqe_data_seg);

	for (const struct ibv_recv_wr *w = wr; w; w = w->next) {
		n++;
		if (w->num_sge < 0 || (uint32_t)w->num_sge > rq->max_gs)
			return EINVAL;
	}
	if (outstanding + n > rq->max_post)
		return ENOMEM;
	for (const struct ibv_recv_wr *w = wr; w; w = w->next) {
		uint32_t idx = rq->head & (rq->wqe_cnt - 1);

		shift_rwqe_write(rq->buf + ((size_t)idx << rq->wqe_shift), stride_gs, w);
		rq->wrid[idx] = w->wr_id;
		rq->head++;
	}
	/* The scatter lists before the counter that advertises them. */
	to_device_barrier();
	rq->db[MLX5_RCV_DBR] = htobe32(rq->head & 0xffff);
	return 0;
}

static uint32_t status_of(uint8_t syndrome)
{
	switch (syndrome) {
	case MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR: return IBV_WC_LOC_LEN_ERR;
	case MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR: return IBV_WC_LOC_QP_OP_ERR;
	case MLX5_CQE_SYNDROME_LOCAL_PROT_ERR: return IBV_WC_LOC_PROT_ERR;
	case MLX5_CQE_SYNDROME_WR_FLUSH_ERR: return IBV_WC_WR_FLUSH_ERR;
	case MLX5_CQE_SYNDROME_MW_BIND_ERR: return IBV_WC_MW_BIND_ERR;
	case MLX5_CQE_SYNDROME_BAD_RESP_ERR: return IBV_WC_BAD_RESP_ERR;
	case MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR: return IBV_WC_LOC_ACCESS_ERR;
	case MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR: return IBV_WC_REM_INV_REQ_ERR;
	case MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR: return IBV_WC_REM_ACCESS_ERR;
	case MLX5_CQE_SYNDROME_REMOTE_OP_ERR: return IBV_WC_REM_OP_ERR;
	case MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR: return IBV_WC_RETRY_EXC_ERR;
	case MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR: return IBV_WC_RNR_RETRY_EXC_ERR;
	case MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR: return IBV_WC_REM_ABORT_ERR;
	}
	return IBV_WC_GENERAL_ERR;
}

int shift_cq_next(struct shift_cqr *cq, struct shift_fwc *w, uint16_t *wqe_counter, int *receive)
{
	struct mlx5_cqe64 *e = (void *)(cq->buf + (size_t)(cq->cons_index & (cq->ncqe - 1)) * 64);
	uint8_t op_own = __atomic_load_n(&e->op_own, __ATOMIC_RELAXED);
	uint8_t op = op_own >> 4;
	uint32_t sop;

	if (op == MLX5_CQE_INVALID || !!(op_own & MLX5_CQE_OWNER_MASK) != !!(cq->cons_index & cq->ncqe))
		return 0;
	__atomic_store_n(&cq->cons_index, cq->cons_index + 1, __ATOMIC_RELAXED); /* see shift_cq_empty */
	/* The ownership check before the reads of the entry. */
	from_device_barrier();
	sop = be32toh(e->sop_drop_qpn);
	memset(w, 0, sizeof(*w));
	w->qp_num = sop & 0xffffff;
	*wqe_counter = be16toh(e->wqe_counter);
	*receive = 0;
	switch (op) {
	case MLX5_CQE_REQ:
		switch (sop >> 24) {
		case MLX5_OPCODE_RDMA_WRITE_IMM:
			w->opcode = IBV_WC_RDMA_WRITE;
			w->wc_flags = IBV_WC_WITH_IMM;
			break;
		case MLX5_OPCODE_RDMA_WRITE:
			w->opcode = IBV_WC_RDMA_WRITE;
			break;
		case MLX5_OPCODE_SEND_IMM:
			w->opcode = IBV_WC_SEND;
			w->wc_flags = IBV_WC_WITH_IMM;
			break;
		case MLX5_OPCODE_SEND:
		case MLX5_OPCODE_SEND_INVAL:
			w->opcode = IBV_WC_SEND;
			break;
		case MLX5_OPCODE_RDMA_READ:
			w->opcode = IBV_WC_RDMA_READ;
			w->byte_len = be32toh(e->byte_cnt);
			break;
		case MLX5_OPCODE_ATOMIC_CS:
			w->opcode = IBV_WC_COMP_SWAP;
			w->byte_len = 8;
			break;
		case MLX5_OPCODE_ATOMIC_FA:
			w->opcode = IBV_WC_FETCH_ADD;
			w->byte_len = 8;
			break;
		}
		break;
	case MLX5_CQE_RESP_WR_IMM:
	case MLX5_CQE_RESP_SEND:
	case MLX5_CQE_RESP_SEND_IMM:
	case MLX5_CQE_RESP_SEND_INV: {
		uint32_t fr = be32toh(e->flags_rqpn);

		*receive = 1;
		w->opcode = op == MLX5_CQE_RESP_WR_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
		w->byte_len = be32toh(e->byte_cnt);
		if (op == MLX5_CQE_RESP_WR_IMM || op == MLX5_CQE_RESP_SEND_IMM) {
			w->wc_flags = IBV_WC_WITH_IMM;
			w->imm = e->imm_inval_pkey;
		} else if (op == MLX5_CQE_RESP_SEND_INV) {
			w->wc_flags = IBV_WC_WITH_INV;
			w->imm = e->imm_inval_pkey;
		}
		w->src_qp = fr & 0xffffff;
		w->sl = (fr >> 24) & 0xf;
		if ((fr >> 28) & 3)
			w->wc_flags |= IBV_WC_GRH;
		break;
	}
	case MLX5_CQE_REQ_ERR:
	case MLX5_CQE_RESP_ERR: {
		struct mlx5_err_cqe *ec = (void *)e;

		w->status = status_of(ec->syndrome);
		w->vendor_err = ec->vendor_err_synd;
		*receive = op == MLX5_CQE_RESP_ERR;
		break;
	}
	default:
		w->status = IBV_WC_GENERAL_ERR;
	}
	return 1;
}

/* The retires read the slot's wr_id before the new tail frees the slot: a poster on another
 * thread (posts and polls take different locks) may fill it as soon as it loads the tail.
 * libmlx5 may store the tail first because its overflow check takes the CQ's lock when the
 * queue looks full (mlx5_wq_overflow), which orders the whole poll before the post; this
 * poster takes no CQ lock. */
uint64_t shift_sq_retire(struct shift_sq *sq, uint16_t wqe_counter)
{
	uint32_t idx = wqe_counter & (sq->wqe_cnt - 1);
	uint64_t wr_id = sq->wrid[idx];

	__atomic_store_n(&sq->tail, sq->wqe_head[idx], __ATOMIC_RELEASE);
	return wr_id;
}

uint64_t shift_rq_retire(struct shift_rq *rq, uint16_t wqe_counter)
{
	uint32_t idx = wqe_counter & (rq->wqe_cnt - 1);
	uint64_t wr_id = rq->wrid[idx];

	__atomic_store_n(&rq->tail, rq->tail + 1, __ATOMIC_RELEASE);
	return wr_id;
}

/* update_cons_index: tell the device which entries it may overwrite. */
void shift_cq_update_ci(struct shift_cqr *cq)
{
	cq->db[SHIFT_CQ_SET_CI] = htobe32(cq->cons_index & 0xffffff);
}

/* mlx5_arm_cq: the arm word in the record, then the CQ doorbell. */
void shift_cq_arm(struct shift_cqr *cq, int solicited)
{
	uint32_t sn = __atomic_load_n(&cq->arm_sn, __ATOMIC_RELAXED) & 3; /* bumped by cq_event on another thread */
	uint32_t cmd = solicited ? MLX5_CQ_DB_REQ_NOT_SOL : MLX5_CQ_DB_REQ_NOT;
	uint32_t ci = cq->cons_index & 0xffffff;
	uint64_t doorbell;

	cq->db[SHIFT_CQ_ARM_DB] = htobe32(sn << 28 | cmd | ci);
	/* The record holds the new word before the device is told to look at it. */
	flush_writes();
	doorbell = htobe64((uint64_t)(sn << 28 | cmd | ci) << 32 | cq->cqn);
	*(volatile uint64_t *)(cq->uar + MLX5_CQ_DOORBELL) = doorbell;
	flush_writes();
}

/* __mlx5_cq_clean: drop qpn's unpolled CQEs and close the gap, keeping each slot's owner bit. */
void shift_cq_clean(struct shift_cqr *cq, uint32_t qpn)
{
	uint32_t prod = cq->cons_index, freed = 0;

	for (;;) {
		struct mlx5_cqe64 *e = (void *)(cq->buf + (size_t)(prod & (cq->ncqe - 1)) * 64);

		if (prod - cq->cons_index == cq->ncqe || e->op_own >> 4 == MLX5_CQE_INVALID ||
		    !!(e->op_own & MLX5_CQE_OWNER_MASK) != !!(prod & cq->ncqe))
			break;
		prod++;
	}
	while (prod != cq->cons_index) {
		struct mlx5_cqe64 *e;

		prod--;
		e = (void *)(cq->buf + (size_t)(prod & (cq->ncqe - 1)) * 64);
		if ((be32toh(e->sop_drop_qpn) & 0xffffff) == qpn) {
			freed++;
		} else if (freed) {
			struct mlx5_cqe64 *d = (void *)(cq->buf + (size_t)((prod + freed) & (cq->ncqe - 1)) * 64);
			uint8_t owner = d->op_own & MLX5_CQE_OWNER_MASK;

			memcpy(d, e, 63);
			d->op_own = (e->op_own & ~MLX5_CQE_OWNER_MASK) | owner;
		}
	}
	if (freed) {
		__atomic_store_n(&cq->cons_index, cq->cons_index + freed, __ATOMIC_RELAXED);
		to_device_barrier();
		shift_cq_update_ci(cq);
	}
}

struct shift_fast_ctx *shift_fast_ctx_new(void)
{
	struct shift_fast_ctx *c = calloc(1, sizeof(*c));
	const char *st = getenv("MLX5_SINGLE_THREADED");

	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	c->single_threaded = st && strcmp(st, "1") == 0;
	return c;
}

void shift_fast_ctx_free(struct shift_fast_ctx *c)
{
	if (!c)
		return;
	for (int i = 0; i < SHIFT_QPT_SIZE; i++) {
		free(c->qpt[i]);
		free(c->svt[i]);
	}
	for (uint32_t i = 0; i < c->nbf; i++) {
		if (c->bf[i]) {
			pthread_spin_destroy(&c->bf[i]->lock);
			free(c->bf[i]);
		}
	}
	free(c->bf);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static void lock_init(struct shift_lock *l, int need)
{
	pthread_spin_init(&l->s, PTHREAD_PROCESS_PRIVATE);
	l->need = need;
}

/* bf_get returns the context's register for a bfreg index, creating it on first use: QPs the
 * kernel gave one bfreg share its halves' alternation and its lock (c->lock held). */
static struct shift_bf *bf_get(struct shift_fast_ctx *c, const struct shift_qp_rings *r)
{
	struct shift_bf *bf;

	if (r->bf_index >= c->nbf) {
		uint32_t n = r->bf_index + 1 > 2 * c->nbf ? r->bf_index + 1 : 2 * c->nbf;
		struct shift_bf **t = realloc(c->bf, n * sizeof(*t));

		if (!t)
			return NULL;
		memset(t + c->nbf, 0, (n - c->nbf) * sizeof(*t));
		c->bf = t;
		c->nbf = n;
	}
	if (c->bf[r->bf_index])
		return c->bf[r->bf_index];
	bf = calloc(1, sizeof(*bf));
	if (!bf)
		return NULL;
	bf->reg = r->bf_reg;
	bf->buf_size = r->bf_buf_size;
	bf->index = r->bf_index;
	bf->need_lock = r->bf_need_lock && !c->single_threaded;
	pthread_spin_init(&bf->lock, PTHREAD_PROCESS_PRIVATE);
	c->bf[r->bf_index] = bf;
	return bf;
}

struct shift_fast_qp *shift_fast_qp_new(struct shift_fast_ctx *c, const struct shift_qp_rings *r)
{
	struct shift_fast_qp *qp = calloc(1, sizeof(*qp));
	uint32_t sq_n = r->sq_wqe_cnt ? r->sq_wqe_cnt : 1, rq_n = r->rq_wqe_cnt ? r->rq_wqe_cnt : 1;

	if (!qp)
		return NULL;
	qp->qpn = r->qpn;
	qp->sq.buf = r->sq;
	qp->sq.wqe_cnt = r->sq_wqe_cnt;
	qp->sq.max_post = r->sq_max_post;
	qp->sq.max_gs = r->sq_max_gs;
	qp->sq.max_inline = r->max_inline;
	qp->sq.qpn = r->qpn;
	qp->sq.sig_all = r->sig_all;
	qp->sq.db = (volatile __be32 *)r->dbrec;
	qp->sq.wrid = calloc(sq_n, sizeof(*qp->sq.wrid));
	qp->sq.wqe_head = calloc(sq_n, sizeof(*qp->sq.wqe_head));
	lock_init(&qp->sq.lock, !c->single_threaded);
	qp->rq.buf = r->rq;
	qp->rq.wqe_cnt = r->rq_wqe_cnt;
	qp->rq.wqe_shift = r->rq_wqe_shift;
	qp->rq.max_post = r->rq_max_post;
	qp->rq.max_gs = r->rq_max_gs;
	qp->rq.db = (volatile __be32 *)r->dbrec;
	qp->rq.wrid = calloc(rq_n, sizeof(*qp->rq.wrid));
	lock_init(&qp->rq.lock, !c->single_threaded);
	pthread_mutex_lock(&c->lock);
	qp->sq.bf = bf_get(c, r);
	pthread_mutex_unlock(&c->lock);
	if (!qp->sq.wrid || !qp->sq.wqe_head || !qp->rq.wrid || !qp->sq.bf) {
		shift_fast_qp_free(qp);
		return NULL;
	}
	return qp;
}

void shift_fast_qp_free(struct shift_fast_qp *qp)
{
	if (!qp)
		return;
	pthread_spin_destroy(&qp->sq.lock.s);
	pthread_spin_destroy(&qp->rq.lock.s);
	free(qp->sq.wrid);
	free(qp->sq.wqe_head);
	free(qp->rq.wrid);
	free(qp);
}

int shift_fast_qp_publish(struct shift_fast_ctx *c, struct shift_fast_qp *qp)
{
	uint32_t hi = (qp->qpn >> SHIFT_QPT_SHIFT) & (SHIFT_QPT_SIZE - 1);
	struct shift_fast_qp **t;

	pthread_mutex_lock(&c->lock);
	t = c->qpt[hi];
	if (!t) {
		t = calloc(SHIFT_QPT_SIZE, sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&c->lock);
			return ENOMEM;
		}
		__atomic_store_n(&c->qpt[hi], t, __ATOMIC_RELEASE);
	}
	/* The QP's fields before the pointer a poller may load. */
	__atomic_store_n(&t[qp->qpn & (SHIFT_QPT_SIZE - 1)], qp, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* Second-level tables stay allocated until the context is freed: a poller may hold one. */
void shift_fast_qp_unpublish(struct shift_fast_ctx *c, struct shift_fast_qp *qp)
{
	uint32_t hi = (qp->qpn >> SHIFT_QPT_SHIFT) & (SHIFT_QPT_SIZE - 1);

	pthread_mutex_lock(&c->lock);
	if (c->qpt[hi] && c->qpt[hi][qp->qpn & (SHIFT_QPT_SIZE - 1)] == qp) {
		__atomic_store_n(&c->qpt[hi][qp->qpn & (SHIFT_QPT_SIZE - 1)], NULL, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&c->lock);
}

void shift_fast_qp_reset(struct shift_fast_qp *qp)
{
	if (qp->sq.wqe_cnt) {
		qp->sq.cur_post = 0;
		qp->sq.head = 0;
		__atomic_store_n(&qp->sq.tail, 0, __ATOMIC_RELEASE);
		memset(qp->sq.buf, 0, (size_t)qp->sq.wqe_cnt * MLX5_SEND_WQE_BB);
	}
	if (qp->rq.wqe_cnt) {
		qp->rq.head = 0;
		__atomic_store_n(&qp->rq.tail, 0, __ATOMIC_RELEASE);
		memset(qp->rq.buf, 0, (size_t)qp->rq.wqe_cnt << qp->rq.wqe_shift);
	}
	qp->sq.db[MLX5_RCV_DBR] = 0;
	qp->sq.db[MLX5_SND_DBR] = 0;
}

struct shift_cqr *shift_fast_cq_new(struct shift_fast_ctx *c, const struct shift_cq_rings *r)
{
	struct shift_cqr *cq = calloc(1, sizeof(*cq));

	if (!cq)
		return NULL;
	cq->buf = r->buf;
	cq->ncqe = r->ncqe;
	cq->cqn = r->cqn;
	cq->db = (volatile __be32 *)r->dbrec;
	cq->uar = r->uar;
	lock_init(&cq->lock, !c->single_threaded);
	return cq;
}

void shift_fast_cq_free(struct shift_cqr *cq)
{
	if (!cq)
		return;
	pthread_spin_destroy(&cq->lock.s);
	free(cq);
}

int shift_fast_post_send(struct shift_fast_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	int err, nreq = 0, ds = 0, inl = 0;
	uint8_t *ctrl;

	shift_lock(&qp->sq.lock);
	err = shift_sq_validate(&qp->sq, wr);
	if (err) {
		shift_unlock(&qp->sq.lock);
		*bad = wr; /* nothing of a rejected list was posted */
		return err;
	}
	ctrl = shift_sq_write(&qp->sq, wr, &nreq, &ds, &inl);
	shift_sq_ring(&qp->sq, nreq, ctrl, ds, inl);
	shift_unlock(&qp->sq.lock);
	return 0;
}

int shift_fast_post_recv(struct shift_fast_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	int err;

	shift_lock(&qp->rq.lock);
	err = shift_rq_post(&qp->rq, wr);
	shift_unlock(&qp->rq.lock);
	if (err)
		*bad = wr;
	return err;
}

int shift_fast_poll(struct shift_fast_ctx *c, struct shift_cqr *cq, int want, struct ibv_wc *wc)
{
	int got = 0, err = 0;

	shift_lock(&cq->lock);
	while (got < want) {
		struct shift_fwc w;
		struct shift_fast_qp *qp;
		struct ibv_wc *d = &wc[got];
		uint16_t ctr;
		int recv;

		if (!shift_cq_next(cq, &w, &ctr, &recv))
			break;
		qp = cq->last;
		if (!qp || qp->qpn != w.qp_num) {
			qp = shift_fast_find(c, w.qp_num);
			if (!qp) {
				err = 1; /* a CQE of no QP of this context: mlx5_poll_one's CQ_POLL_ERR */
				break;
			}
			cq->last = qp;
		}
		memset(d, 0, sizeof(*d));
		d->wr_id = recv ? shift_rq_retire(&qp->rq, ctr) : shift_sq_retire(&qp->sq, ctr);
		d->status = w.status;
		d->qp_num = w.qp_num;
		d->vendor_err = w.vendor_err;
		if (w.status == IBV_WC_SUCCESS) {
			d->opcode = w.opcode;
			d->byte_len = w.byte_len;
			d->imm_data = w.imm;
			d->src_qp = w.src_qp;
			d->wc_flags = w.wc_flags;
			d->sl = w.sl;
		}
		got++;
	}
	if (got || err)
		shift_cq_update_ci(cq);
	shift_unlock(&cq->lock);
	return got ? got : (err ? -1 : 0);
}

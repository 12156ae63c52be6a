/*
 * qpcycle: the QP life cycle on a CQ shared by two QPs, which is where a data path outside
 * the kernel must do the kernel-adjacent work itself (libmlx5's __mlx5_cq_clean at RESET and
 * destroy, mlx5_init_qp_indices at RESET):
 *
 *   qpcycle -d DEV -D PEER
 *
 * 1. QPs A and B on DEV share one CQ; each is connected to its own QP on PEER.
 * 2. A posts 32 signaled WRITEs; one of its completions is polled; A is destroyed with the
 *    rest possibly still in the CQ. B then posts and polls: no completion may name A.
 * 3. B and its peer go to RESET and are connected again; B's WRITEs must then still complete
 *    and land (the indices restart at 0 on both sides).
 * Prints "qpcycle: ok" and exits 0, or names what failed and exits 1.
 */
#include "end.h"

static void write_burst(struct ibv_qp *qp, struct end *e, struct end *peer, int n, uint64_t tag)
{
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf, .length = 64, .lkey = e->mr->lkey };
	struct ibv_send_wr wr = { 0 }, *bad;
	int err;

	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)peer->buf;
	wr.wr.rdma.rkey = peer->mr->rkey;
	for (int i = 0; i < n; i++) {
		wr.wr_id = tag + i;
		if ((err = ibv_post_send(qp, &wr, &bad)))
			die("ibv_post_send", err);
	}
}

/* reap polls n completions of qp within 30 s; any other QP's completion is a failure. */
static void reap(struct ibv_cq *cq, struct ibv_qp *qp, int n, uint64_t tag)
{
	double start = now_ns();
	struct ibv_wc wc;
	int got = 0, r;

	while (got < n) {
		if ((r = ibv_poll_cq(cq, 1, &wc)) < 0)
			die("ibv_poll_cq", EIO);
		if (r == 0) {
			if (now_ns() - start > 30e9)
				die("completions within 30 s", ETIMEDOUT);
			continue;
		}
		if (wc.qp_num != qp->qp_num) {
			fprintf(stderr, "qpcycle: completion of QP %#x (wr_id %#llx, %s) after it was destroyed; want QP %#x\n",
				wc.qp_num, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), qp->qp_num);
			exit(1);
		}
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != tag + got) {
			fprintf(stderr, "qpcycle: completion %d of QP %#x: %s, wr_id %#llx; want success, wr_id %#llx\n",
				got, qp->qp_num, ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id,
				(unsigned long long)(tag + got));
			exit(1);
		}
		got++;
	}
}

static void reset(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
	int err;

	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE)))
		die("modify RESET", err);
}

int main(int argc, char **argv)
{
	const char *dev = NULL, *peer = NULL;
	struct end a = { 0 }, p = { 0 };
	struct ibv_qp *qa, *qb, *pa, *pb;
	struct ibv_wc wc;
	int err;

	dev_args(argc, argv, &dev, &peer);
	setup(&a, dev, 64);
	setup(&p, peer, 64);
	qa = a.qp;
	qb = rc_qp(&a, a.cq, 64);
	pa = p.qp;
	pb = rc_qp(&p, p.cq, 64);
	connect_qp(qa, pa, &p.gid);
	connect_qp(pa, qa, &a.gid);
	connect_qp(qb, pb, &p.gid);
	connect_qp(pb, qb, &a.gid);

	write_burst(qa, &a, &p, 32, 0xa000);
	reap(a.cq, qa, 1, 0xa000);
	if ((err = ibv_destroy_qp(qa)))
		die("ibv_destroy_qp A", err);
	write_burst(qb, &a, &p, 32, 0xb000);
	reap(a.cq, qb, 32, 0xb000);
	if (ibv_poll_cq(a.cq, 1, &wc) != 0) {
		fprintf(stderr, "qpcycle: a completion of QP %#x is left after all were reaped\n", wc.qp_num);
		return 1;
	}

	reset(qb);
	reset(pb);
	connect_qp(qb, pb, &p.gid);
	connect_qp(pb, qb, &a.gid);
	memset(a.buf, 0x5a, 64);
	write_burst(qb, &a, &p, 48, 0xc000);
	reap(a.cq, qb, 48, 0xc000);
	for (int i = 0; i < 64; i++) {
		if ((unsigned char)p.buf[i] != 0x5a) {
			fprintf(stderr, "qpcycle: after RESET the WRITEs did not land (byte %d is %#x)\n", i, (unsigned char)p.buf[i]);
			return 1;
		}
	}
	if ((err = ibv_destroy_qp(qb)) || (err = ibv_destroy_qp(pa)) || (err = ibv_destroy_qp(pb)))
		die("ibv_destroy_qp", err);
	if ((err = ibv_dereg_mr(a.mr)) || (err = ibv_dereg_mr(p.mr)))
		die("ibv_dereg_mr", err);
	if ((err = ibv_destroy_cq(a.cq)) || (err = ibv_destroy_cq(p.cq)))
		die("ibv_destroy_cq", err);
	if ((err = ibv_dealloc_pd(a.pd)) || (err = ibv_dealloc_pd(p.pd)))
		die("ibv_dealloc_pd", err);
	if ((err = ibv_close_device(a.ctx)) || (err = ibv_close_device(p.ctx)))
		die("ibv_close_device", err);
	printf("qpcycle: ok\n");
	return 0;
}

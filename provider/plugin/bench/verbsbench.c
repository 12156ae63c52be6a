/*
 * verbsbench: times ibv_post_send and an empty ibv_poll_cq through libibverbs, on whatever
 * provider the environment selects (libmlx5-shift in plain or SHIFT mode, Debian's libmlx5).
 * Two devices of this process are connected back to back: RC QP on -d to RC QP on -D.
 *
 *   verbsbench -d DEV -D PEER [-n ITERS] [-s SIZE]
 *
 * post_send: ITERS posts of one SIZE-byte inline RDMA WRITE (one SGE), signaled every 64th;
 * each run of 64 consecutive posts is timed with CLOCK_MONOTONIC, the polls that free the
 * queue between runs are not. poll_empty: ITERS ibv_poll_cq calls on an empty CQ, timed as
 * one loop. Prints one line: "post_send_ns=X poll_empty_ns=Y".
 */
#include "end.h"

#define BATCH 64

static void wait_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	int n;
	double start = now_ns();

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		if (now_ns() - start > 30e9)
			die("no completion within 30 s", ETIMEDOUT);
	if (n < 0 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "verbsbench: completion %s\n", n < 0 ? "poll failed" : ibv_wc_status_str(wc.status));
		exit(1);
	}
}

int main(int argc, char **argv)
{
	const char *dev = NULL, *peer = NULL;
	long iters = 100000;
	size_t size = 64;
	struct end a, b;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	double post_ns = 0, t0;
	int opt, err;

	while ((opt = getopt(argc, argv, "d:D:n:s:")) != -1) {
		switch (opt) {
		case 'd': dev = optarg; break;
		case 'D': peer = optarg; break;
		case 'n': iters = atol(optarg); break;
		case 's': size = atol(optarg); break;
		default:
			fprintf(stderr, "usage: verbsbench -d DEV -D PEER [-n ITERS] [-s SIZE]\n");
			return 2;
		}
	}
	if (!dev || !peer || iters < BATCH) {
		fprintf(stderr, "usage: verbsbench -d DEV -D PEER [-n ITERS >= %d] [-s SIZE]\n", BATCH);
		return 2;
	}
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	setup(&a, dev, size);
	setup(&b, peer, size);
	connect_qp(a.qp, b.qp, &b.gid);
	connect_qp(b.qp, a.qp, &a.gid);

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)a.buf;
	sge.length = size;
	sge.lkey = a.mr->lkey;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf;
	wr.wr.rdma.rkey = b.mr->rkey;
	/* Warm up: the first calls wait for the Go runtime of a Go provider. */
	for (int i = 0; i < BATCH; i++) {
		wr.send_flags = IBV_SEND_INLINE | (i == BATCH - 1 ? IBV_SEND_SIGNALED : 0);
		if ((err = ibv_post_send(a.qp, &wr, &bad)))
			die("ibv_post_send", err);
	}
	wait_one(a.cq);
	for (long done = 0; done + BATCH <= iters; done += BATCH) {
		t0 = now_ns();
		for (int i = 0; i < BATCH; i++) {
			wr.wr_id = done + i;
			wr.send_flags = IBV_SEND_INLINE | (i == BATCH - 1 ? IBV_SEND_SIGNALED : 0);
			if ((err = ibv_post_send(a.qp, &wr, &bad)))
				die("ibv_post_send", err);
		}
		post_ns += now_ns() - t0;
		wait_one(a.cq);
	}
	t0 = now_ns();
	for (long i = 0; i < iters; i++)
		if (ibv_poll_cq(a.cq, 1, &wc) != 0)
			die("poll of an empty CQ returned a completion", EINVAL);
	printf("post_send_ns=%.2f poll_empty_ns=%.2f\n", post_ns / (iters / BATCH * BATCH), (now_ns() - t0) / iters);
	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	ibv_dereg_mr(a.mr);
	ibv_dereg_mr(b.mr);
	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
	ibv_dealloc_pd(a.pd);
	ibv_dealloc_pd(b.pd);
	ibv_close_device(a.ctx);
	ibv_close_device(b.ctx);
	free(a.buf);
	free(b.buf);
	return 0;
}

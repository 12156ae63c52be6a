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
 * one loop. post_recv: ITERS posts of one receive WR (one SGE) on a third QP in INIT, timed
 * in runs of 16 (its receive queue), emptied between runs by RESET and INIT again.
 * poll_one: ibv_poll_cq(1) calls that return a completion, while 64 signaled WRITEs complete:
 * each call is timed alone, and the clock's share is taken out by subtracting the median of
 * the calls that found nothing and adding poll_empty. Prints one line:
 * "post_send_ns=A poll_empty_ns=B post_recv_ns=C poll_one_ns=D".
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

static void to_state(struct ibv_qp *qp, enum ibv_qp_state st)
{
	struct ibv_qp_attr a = { .qp_state = st, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	int err = ibv_modify_qp(qp, &a, st == IBV_QPS_INIT ? IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS : IBV_QP_STATE);

	if (err)
		die(st == IBV_QPS_INIT ? "modify INIT" : "modify RESET", err);
}

/* time_post_recv returns the mean ns of one ibv_post_recv of one WR with one SGE. */
static double time_post_recv(struct end *e, long iters)
{
	struct ibv_qp *qp = rc_qp(e, e->cq, 0);
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf, .length = 4096, .lkey = e->mr->lkey };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;
	double ns = 0, t0;
	long n = 0;
	int err;

	to_state(qp, IBV_QPS_INIT);
	while (n + 16 <= iters) {
		t0 = now_ns();
		for (int i = 0; i < 16; i++) {
			wr.wr_id = n + i;
			if ((err = ibv_post_recv(qp, &wr, &bad)))
				die("ibv_post_recv", err);
		}
		ns += now_ns() - t0;
		n += 16;
		to_state(qp, IBV_QPS_RESET);
		to_state(qp, IBV_QPS_INIT);
	}
	if ((err = ibv_destroy_qp(qp)))
		die("ibv_destroy_qp", err);
	return ns / n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, long n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n ? v[n / 2] : 0;
}

/* A fine clock for timing single calls: the TSC on x86-64 (CLOCK_MONOTONIC's resolution on a
 * VM can be tens of ns, coarser than a poll), converted to ns by calibrating against
 * CLOCK_MONOTONIC; CLOCK_MONOTONIC elsewhere. */
#if defined(__x86_64__)
#include <x86intrin.h>
static inline double ticks(void)
{
	unsigned int aux;

	return (double)__rdtscp(&aux);
}

static double ns_per_tick(void)
{
	double t0 = now_ns(), c0 = ticks(), t1, c1;

	do
		t1 = now_ns();
	while (t1 - t0 < 50e6);
	c1 = ticks();
	return (t1 - t0) / (c1 - c0);
}
#else
static inline double ticks(void)
{
	return now_ns();
}

static double ns_per_tick(void)
{
	return 1;
}
#endif

/* time_poll_one returns the median ns of an ibv_poll_cq(1) call that returns a completion,
 * less the median of a timed call that returns none (the clock's share plus an empty poll):
 * medians, because on a busy machine a call is now and then preempted for a timeslice. */
static double time_poll_one(struct end *e, struct ibv_send_wr *wr, long iters)
{
	double *one = calloc(iters, sizeof(double)), *none = calloc(iters, sizeof(double)), t0, dt, r1, r0;
	double scale = ns_per_tick();
	long n_one = 0, n_none = 0;
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	int err, r;

	if (!one || !none)
		die("calloc", ENOMEM);
	while (n_one + BATCH <= iters) {
		for (int i = 0; i < BATCH; i++) {
			wr->send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
			if ((err = ibv_post_send(e->qp, wr, &bad)))
				die("ibv_post_send", err);
		}
		for (int got = 0; got < BATCH;) {
			t0 = ticks();
			r = ibv_poll_cq(e->cq, 1, &wc);
			dt = ticks() - t0;
			if (r < 0 || (r == 1 && wc.status != IBV_WC_SUCCESS))
				die("completion", EIO);
			if (r == 1) {
				one[n_one++] = dt;
				got++;
			} else if (n_none < iters) {
				none[n_none++] = dt;
			}
		}
	}
	r1 = median(one, n_one);
	r0 = median(none, n_none);
	free(one);
	free(none);
	return (r1 - r0) * scale;
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
	double post_ns = 0, empty_ns, recv_ns, one_ns, t0;
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
	empty_ns = (now_ns() - t0) / iters;
	recv_ns = time_post_recv(&a, iters);
	one_ns = time_poll_one(&a, &wr, iters) + empty_ns;
	printf("post_send_ns=%.2f poll_empty_ns=%.2f post_recv_ns=%.2f poll_one_ns=%.2f\n",
	       post_ns / (iters / BATCH * BATCH), empty_ns, recv_ns, one_ns);
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

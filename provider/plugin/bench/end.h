/*
 * The two-ended RC set-up the C harnesses share (verbsbench.c, qpcycle.c): open a device by
 * name, a PD, CQ, RC QP and a 1 MiB MR on it, and connect two such ends back to back over
 * GID index 0 of port 1.
 */
#ifndef SHIFT_BENCH_END_H
#define SHIFT_BENCH_END_H

#define _GNU_SOURCE /* program_invocation_short_name */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
	union ibv_gid gid;
};

static void die(const char *what, int err)
{
	fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, strerror(err));
	exit(1);
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static struct ibv_context *open_dev(const char *name)
{
	int n;
	struct ibv_device **l = ibv_get_device_list(&n);
	struct ibv_context *c = NULL;

	if (!l)
		die("ibv_get_device_list", errno);
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(l[i]), name))
			c = ibv_open_device(l[i]);
	ibv_free_device_list(l);
	if (!c)
		die(name, errno ? errno : ENODEV);
	return c;
}

/* rc_qp creates an RC QP on e's PD with cq for both queues. */
static struct ibv_qp *rc_qp(struct end *e, struct ibv_cq *cq, size_t inline_size)
{
	struct ibv_qp_init_attr qa = { 0 };
	struct ibv_qp *qp;

	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 256;
	qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = inline_size;
	if (!(qp = ibv_create_qp(e->pd, &qa)))
		die("ibv_create_qp", errno);
	return qp;
}

static void setup(struct end *e, const char *name, size_t size)
{
	e->ctx = open_dev(name);
	if (!(e->pd = ibv_alloc_pd(e->ctx)))
		die("ibv_alloc_pd", errno);
	if (!(e->cq = ibv_create_cq(e->ctx, 1024, NULL, NULL, 0)))
		die("ibv_create_cq", errno);
	e->qp = rc_qp(e, e->cq, size);
	if (posix_memalign((void **)&e->buf, 4096, 1 << 20))
		die("posix_memalign", ENOMEM);
	memset(e->buf, 0, 1 << 20);
	if (!(e->mr = ibv_reg_mr(e->pd, e->buf, 1 << 20, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)))
		die("ibv_reg_mr", errno);
	if (ibv_query_gid(e->ctx, 1, 0, &e->gid))
		die("ibv_query_gid", errno);
}

/* connect_qp takes qp through INIT and RTR to RTS, connected to peer_qp at peer_gid. */
static void connect_qp(struct ibv_qp *qp, struct ibv_qp *peer_qp, const union ibv_gid *peer_gid)
{
	struct ibv_qp_attr a = { 0 };
	int err;

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
		die("modify INIT", err);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer_qp->qp_num;
	a.rq_psn = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *peer_gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
		die("modify RTR", err);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 1;
	a.max_rd_atomic = 1;
	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)))
		die("modify RTS", err);
}

/* dev_args reads "-d DEV -D PEER", the two devices of the harnesses without other options,
 * or exits with the usage. */
static inline void dev_args(int argc, char **argv, const char **dev, const char **peer)
{
	int opt;

	*dev = *peer = NULL;
	while ((opt = getopt(argc, argv, "d:D:")) != -1) {
		switch (opt) {
		case 'd': *dev = optarg; break;
		case 'D': *peer = optarg; break;
		default: *dev = NULL;
		}
	}
	if (!*dev || !*peer) {
		fprintf(stderr, "usage: %s -d DEV -D PEER\n", program_invocation_short_name);
		exit(2);
	}
}

#endif

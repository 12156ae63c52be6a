/*
 * What libmlx5-shift does not offer, refused with EOPNOTSUPP and said once. Without the
 * line a program prints only its own "Couldn't create QP" (ibv_uc_pingpong) or "Couldn't
 * create SRQ" (ibv_srq_pingpong): the errno alone does not tell a user that this provider
 * serves RC QPs without shared receive queues. Each reason is printed once per process, to
 * standard error, so a program that probes a verb and goes on without it (a CQ created the
 * plain way after create_cq_ex failed) costs one line, not one per call.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "plugin.h"

void shift_refuse(int *once, const char *op, const char *why)
{
	if (!__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
		fprintf(stderr, "libmlx5-shift: %s: %s: %s\n", op, why, strerror(EOPNOTSUPP));
	errno = EOPNOTSUPP;
}

static const char *qp_type_name(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_UC:
		return "UC";
	case IBV_QPT_UD:
		return "UD";
	case IBV_QPT_RAW_PACKET:
		return "raw packet";
	case IBV_QPT_XRC_SEND:
		return "XRC send";
	case IBV_QPT_XRC_RECV:
		return "XRC receive";
	case IBV_QPT_DRIVER:
		return "driver (DC)";
	default:
		return "this";
	}
}

int shift_qp_type_refused(const struct ibv_qp_init_attr *attr)
{
	static int once_type, once_srq;
	char why[96];

	if (attr->qp_type != IBV_QPT_RC) {
		snprintf(why, sizeof(why), "%s QPs are not offered (RC only)", qp_type_name(attr->qp_type));
		shift_refuse(&once_type, "create_qp", why);
		return 1;
	}
	if (attr->srq) {
		shift_refuse(&once_srq, "create_qp", "QPs on a shared receive queue are not offered");
		return 1;
	}
	return 0;
}

struct ibv_srq *shift_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	static int once;

	(void)pd;
	(void)attr;
	shift_refuse(&once, "create_srq", "shared receive queues are not offered");
	return NULL;
}

struct ibv_srq *shift_create_srq_ex(struct ibv_context *c, struct ibv_srq_init_attr_ex *attr)
{
	static int once;

	(void)c;
	(void)attr;
	shift_refuse(&once, "create_srq_ex", "shared receive queues are not offered");
	return NULL;
}

struct ibv_xrcd *shift_open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *attr)
{
	static int once;

	(void)c;
	(void)attr;
	shift_refuse(&once, "open_xrcd", "XRC domains are not offered");
	return NULL;
}

struct ibv_cq_ex *shift_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *attr)
{
	static int once;

	(void)c;
	(void)attr;
	shift_refuse(&once, "create_cq_ex", "extended CQs (ibv_create_cq_ex: timestamps, ibv_start_poll) are not offered; ibv_create_cq is");
	return NULL;
}

struct ibv_mw *shift_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	static int once;

	(void)pd;
	(void)type;
	shift_refuse(&once, "alloc_mw", "memory windows are not offered");
	return NULL;
}

int shift_resize_cq(struct ibv_cq *cq, int cqe)
{
	static int once;

	(void)cq;
	(void)cqe;
	shift_refuse(&once, "resize_cq", "resizing a CQ is not offered");
	return EOPNOTSUPP;
}

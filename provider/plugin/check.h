/* Helpers of the differential tests' C halves (fast_check.go, spost_check.go): the union
 * fields of struct ibv_send_wr, which cgo renders as byte arrays. */
#ifndef SHIFT_CHECK_H
#define SHIFT_CHECK_H

#include <endian.h>
#include <stdint.h>
#include <infiniband/verbs.h>

static inline void check_set_imm(struct ibv_send_wr *w, uint32_t imm)
{
	w->imm_data = htobe32(imm);
}

static inline void check_set_rdma(struct ibv_send_wr *w, uint64_t ra, uint32_t rkey)
{
	w->wr.rdma.remote_addr = ra;
	w->wr.rdma.rkey = rkey;
}

static inline void check_set_atomic(struct ibv_send_wr *w, uint64_t ra, uint32_t rkey, uint64_t compare_add, uint64_t swap)
{
	w->wr.atomic.remote_addr = ra;
	w->wr.atomic.rkey = rkey;
	w->wr.atomic.compare_add = compare_add;
	w->wr.atomic.swap = swap;
}

static inline uint32_t check_wc_imm(const struct ibv_wc *w)
{
	return be32toh(w->imm_data);
}

#endif

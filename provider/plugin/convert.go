package main

/*
#include "plugin.h"
*/
import "C"

import (
	"unsafe"

	"github.com/shift-rdma/shift/provider/verbs"
)

// Conversions between libibverbs' structs and package verbs. cgo renders C unions as byte
// arrays; union ibv_gid is its 16 raw bytes, which is what verbs keeps.

func pathFromC(a *C.struct_ibv_ah_attr) verbs.Path {
	return verbs.Path{DGID: *(*[16]byte)(unsafe.Pointer(&a.grh.dgid)), FlowLabel: uint32(a.grh.flow_label),
		SGIDIndex: uint8(a.grh.sgid_index), HopLimit: uint8(a.grh.hop_limit), TrafficClass: uint8(a.grh.traffic_class),
		DLID: uint16(a.dlid), SL: uint8(a.sl), SrcPathBits: uint8(a.src_path_bits), StaticRate: uint8(a.static_rate),
		IsGlobal: a.is_global != 0, Port: uint8(a.port_num)}
}

func pathToC(p verbs.Path, a *C.struct_ibv_ah_attr) {
	*(*[16]byte)(unsafe.Pointer(&a.grh.dgid)) = p.DGID
	a.grh.flow_label, a.grh.sgid_index = C.uint32_t(p.FlowLabel), C.uint8_t(p.SGIDIndex)
	a.grh.hop_limit, a.grh.traffic_class = C.uint8_t(p.HopLimit), C.uint8_t(p.TrafficClass)
	a.dlid, a.sl, a.src_path_bits, a.static_rate = C.uint16_t(p.DLID), C.uint8_t(p.SL), C.uint8_t(p.SrcPathBits), C.uint8_t(p.StaticRate)
	a.is_global, a.port_num = 0, C.uint8_t(p.Port)
	if p.IsGlobal {
		a.is_global = 1
	}
}

func capFromC(c *C.struct_ibv_qp_cap) verbs.QPCap {
	return verbs.QPCap{MaxSendWR: uint32(c.max_send_wr), MaxRecvWR: uint32(c.max_recv_wr),
		MaxSendSGE: uint32(c.max_send_sge), MaxRecvSGE: uint32(c.max_recv_sge), MaxInlineData: uint32(c.max_inline_data)}
}

func capToC(v verbs.QPCap, c *C.struct_ibv_qp_cap) {
	c.max_send_wr, c.max_recv_wr = C.uint32_t(v.MaxSendWR), C.uint32_t(v.MaxRecvWR)
	c.max_send_sge, c.max_recv_sge = C.uint32_t(v.MaxSendSGE), C.uint32_t(v.MaxRecvSGE)
	c.max_inline_data = C.uint32_t(v.MaxInlineData)
}

// qpAttrFromC copies every field of struct ibv_qp_attr; the mask passed alongside says which
// the provider uses.
func qpAttrFromC(a *C.struct_ibv_qp_attr) verbs.QPAttr {
	return verbs.QPAttr{
		State: verbs.QPState(a.qp_state), CurState: verbs.QPState(a.cur_qp_state),
		EnSQDAsyncNotify: a.en_sqd_async_notify != 0, AccessFlags: verbs.Access(a.qp_access_flags),
		PkeyIndex: uint16(a.pkey_index), Port: uint8(a.port_num), Qkey: uint32(a.qkey),
		AV: pathFromC(&a.ah_attr), PathMTU: uint8(a.path_mtu), Timeout: uint8(a.timeout),
		RetryCnt: uint8(a.retry_cnt), RNRRetry: uint8(a.rnr_retry), RQPSN: uint32(a.rq_psn),
		MaxRdAtomic: uint8(a.max_rd_atomic), AltPath: pathFromC(&a.alt_ah_attr),
		AltPkeyIndex: uint16(a.alt_pkey_index), AltPort: uint8(a.alt_port_num), AltTimeout: uint8(a.alt_timeout),
		MinRNRTimer: uint8(a.min_rnr_timer), SQPSN: uint32(a.sq_psn), MaxDestRdAtomic: uint8(a.max_dest_rd_atomic),
		PathMigState: uint8(a.path_mig_state), Cap: capFromC(&a.cap), DestQPN: uint32(a.dest_qp_num),
		RateLimit: uint32(a.rate_limit),
	}
}

func qpAttrToC(v *verbs.QPAttr, a *C.struct_ibv_qp_attr) {
	a.qp_state, a.cur_qp_state = C.enum_ibv_qp_state(v.State), C.enum_ibv_qp_state(v.CurState)
	a.path_mtu, a.path_mig_state = C.enum_ibv_mtu(v.PathMTU), C.enum_ibv_mig_state(v.PathMigState)
	a.qkey, a.rq_psn, a.sq_psn, a.dest_qp_num = C.uint32_t(v.Qkey), C.uint32_t(v.RQPSN), C.uint32_t(v.SQPSN), C.uint32_t(v.DestQPN)
	a.qp_access_flags = C.uint(v.AccessFlags)
	capToC(v.Cap, &a.cap)
	pathToC(v.AV, &a.ah_attr)
	pathToC(v.AltPath, &a.alt_ah_attr)
	a.pkey_index, a.alt_pkey_index = C.uint16_t(v.PkeyIndex), C.uint16_t(v.AltPkeyIndex)
	a.en_sqd_async_notify, a.sq_draining = 0, 0
	if v.EnSQDAsyncNotify {
		a.en_sqd_async_notify = 1
	}
	if v.SQDraining {
		a.sq_draining = 1
	}
	a.max_rd_atomic, a.max_dest_rd_atomic = C.uint8_t(v.MaxRdAtomic), C.uint8_t(v.MaxDestRdAtomic)
	a.min_rnr_timer, a.port_num, a.timeout = C.uint8_t(v.MinRNRTimer), C.uint8_t(v.Port), C.uint8_t(v.Timeout)
	a.retry_cnt, a.rnr_retry = C.uint8_t(v.RetryCnt), C.uint8_t(v.RNRRetry)
	a.alt_port_num, a.alt_timeout = C.uint8_t(v.AltPort), C.uint8_t(v.AltTimeout)
	a.rate_limit = C.uint32_t(v.RateLimit)
}

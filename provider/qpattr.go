package provider

import (
	"github.com/shift-rdma/shift/provider/verbs"
	"github.com/shift-rdma/shift/uverbs"
)

// The verbs attribute types and the uverbs ones carry the same fields with the same enum
// values (both are checked against verbs.h and the uapi headers); these copy between them.

func toUverbsPath(p verbs.Path) uverbs.Path {
	return uverbs.Path{DGID: p.DGID, FlowLabel: p.FlowLabel, SGIDIndex: p.SGIDIndex, HopLimit: p.HopLimit,
		TrafficClass: p.TrafficClass, DLID: p.DLID, SL: p.SL, SrcPathBits: p.SrcPathBits,
		StaticRate: p.StaticRate, IsGlobal: p.IsGlobal, Port: p.Port}
}

func fromUverbsPath(p uverbs.Path) verbs.Path {
	return verbs.Path{DGID: p.DGID, FlowLabel: p.FlowLabel, SGIDIndex: p.SGIDIndex, HopLimit: p.HopLimit,
		TrafficClass: p.TrafficClass, DLID: p.DLID, SL: p.SL, SrcPathBits: p.SrcPathBits,
		StaticRate: p.StaticRate, IsGlobal: p.IsGlobal, Port: p.Port}
}

func toUverbsQPAttr(a *verbs.QPAttr) uverbs.QPAttr {
	return uverbs.QPAttr{State: uint8(a.State), CurState: uint8(a.CurState), EnSQDAsyncNotify: a.EnSQDAsyncNotify,
		AccessFlags: uint32(a.AccessFlags), PkeyIndex: a.PkeyIndex, Port: a.Port, Qkey: a.Qkey,
		AV: toUverbsPath(a.AV), PathMTU: a.PathMTU, Timeout: a.Timeout, RetryCnt: a.RetryCnt,
		RNRRetry: a.RNRRetry, RQPSN: a.RQPSN, MaxRdAtomic: a.MaxRdAtomic, AltPath: toUverbsPath(a.AltPath),
		AltPkeyIndex: a.AltPkeyIndex, AltPort: a.AltPort, AltTimeout: a.AltTimeout, MinRNRTimer: a.MinRNRTimer,
		SQPSN: a.SQPSN, MaxDestRdAtomic: a.MaxDestRdAtomic, PathMigState: a.PathMigState,
		Cap: uverbs.QPCap{Send_wr: a.Cap.MaxSendWR, Recv_wr: a.Cap.MaxRecvWR, Send_sge: a.Cap.MaxSendSGE,
			Recv_sge: a.Cap.MaxRecvSGE, Inline_data: a.Cap.MaxInlineData},
		DestQPN: a.DestQPN, RateLimit: a.RateLimit, SQDraining: a.SQDraining, SigAll: a.SigAll}
}

func fromUverbsQPAttr(a *uverbs.QPAttr) verbs.QPAttr {
	return verbs.QPAttr{State: verbs.QPState(a.State), CurState: verbs.QPState(a.CurState),
		EnSQDAsyncNotify: a.EnSQDAsyncNotify, AccessFlags: verbs.Access(a.AccessFlags), PkeyIndex: a.PkeyIndex,
		Port: a.Port, Qkey: a.Qkey, AV: fromUverbsPath(a.AV), PathMTU: a.PathMTU, Timeout: a.Timeout,
		RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, RQPSN: a.RQPSN, MaxRdAtomic: a.MaxRdAtomic,
		AltPath: fromUverbsPath(a.AltPath), AltPkeyIndex: a.AltPkeyIndex, AltPort: a.AltPort,
		AltTimeout: a.AltTimeout, MinRNRTimer: a.MinRNRTimer, SQPSN: a.SQPSN, MaxDestRdAtomic: a.MaxDestRdAtomic,
		PathMigState: a.PathMigState,
		Cap: verbs.QPCap{MaxSendWR: a.Cap.Send_wr, MaxRecvWR: a.Cap.Recv_wr, MaxSendSGE: a.Cap.Send_sge,
			MaxRecvSGE: a.Cap.Recv_sge, MaxInlineData: a.Cap.Inline_data},
		DestQPN: a.DestQPN, RateLimit: a.RateLimit, SQDraining: a.SQDraining, SigAll: a.SigAll}
}

package provider

import "github.com/shift-rdma/shift/uverbs"

// Endpoint is what two RC peers exchange out of band to connect (perftest's and NCCL's
// connection record): the QP number, the first PSN the peer will send with, its GID and LID.
type Endpoint struct {
	QPN uint32
	PSN uint32
	GID [16]byte
	LID uint16
}

// ConnectAttr holds the attributes perftest and NCCL set on the INIT, RTR and RTS transitions.
// Zero fields take perftest's defaults (see Defaults).
type ConnectAttr struct {
	Port            uint8
	PKeyIndex       uint16
	Access          uint32 // remote access flags of the QP (AccessRemote*)
	GIDIndex        uint8  // local (source) GID index
	PathMTU         uint8  // enum ibv_mtu (uverbs.MTU1024, ...)
	SL              uint8
	TrafficClass    uint8
	HopLimit        uint8
	FlowLabel       uint32
	Timeout         uint8 // local ACK timeout exponent: 4.096 us * 2^Timeout
	RetryCnt        uint8
	RNRRetry        uint8
	MinRNRTimer     uint8
	MaxRdAtomic     uint8 // outstanding READ/atomic requests as initiator
	MaxDestRdAtomic uint8 // as responder
}

// Defaults fills zero fields with perftest's values: port 1, MTU 1024, timeout 14, retry 7,
// RNR retry 7, min RNR timer 12, hop limit 64, 16 outstanding reads both ways, and remote
// write/read/atomic access.
func (a ConnectAttr) Defaults() ConnectAttr {
	set8 := func(v *uint8, d uint8) {
		if *v == 0 {
			*v = d
		}
	}
	set8(&a.Port, 1)
	set8(&a.PathMTU, uverbs.MTU1024)
	set8(&a.Timeout, 14)
	set8(&a.RetryCnt, 7)
	set8(&a.RNRRetry, 7)
	set8(&a.MinRNRTimer, 12)
	set8(&a.HopLimit, 64)
	set8(&a.MaxRdAtomic, 16)
	set8(&a.MaxDestRdAtomic, 16)
	if a.Access == 0 {
		a.Access = AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic | AccessLocalWrite
	}
	return a
}

// ToInit moves a RESET QP to INIT with its port, pkey index and access flags.
func (q *QP) ToInit(a ConnectAttr) error {
	a = a.Defaults()
	return q.Modify(&QPAttr{State: uint8(QPStateInit), PkeyIndex: a.PKeyIndex, Port: a.Port, AccessFlags: a.Access},
		uverbs.QPAttrState|uverbs.QPAttrPkeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags)
}

// ToRTR moves an INIT QP to RTR towards remote: the address vector (RoCE GRH), path MTU,
// destination QPN, expected receive PSN, responder resources and RNR timer.
func (q *QP) ToRTR(a ConnectAttr, remote Endpoint) error {
	a = a.Defaults()
	attr := QPAttr{State: uint8(QPStateRTR), PathMTU: a.PathMTU, DestQPN: remote.QPN, RQPSN: remote.PSN,
		MaxDestRdAtomic: a.MaxDestRdAtomic, MinRNRTimer: a.MinRNRTimer,
		AV: uverbs.Path{DGID: remote.GID, DLID: remote.LID, SGIDIndex: a.GIDIndex, HopLimit: a.HopLimit,
			TrafficClass: a.TrafficClass, FlowLabel: a.FlowLabel, SL: a.SL, IsGlobal: true, Port: a.Port}}
	return q.Modify(&attr, uverbs.QPAttrState|uverbs.QPAttrAV|uverbs.QPAttrPathMTU|uverbs.QPAttrDestQPN|
		uverbs.QPAttrRQPSN|uverbs.QPAttrMaxDestRdAtomic|uverbs.QPAttrMinRNRTimer)
}

// ToRTS moves an RTR QP to RTS: ACK timeout, retry counts, first send PSN, initiator depth.
func (q *QP) ToRTS(a ConnectAttr, sqPSN uint32) error {
	a = a.Defaults()
	attr := QPAttr{State: uint8(QPStateRTS), Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry,
		SQPSN: sqPSN, MaxRdAtomic: a.MaxRdAtomic}
	return q.Modify(&attr, uverbs.QPAttrState|uverbs.QPAttrTimeout|uverbs.QPAttrRetryCnt|
		uverbs.QPAttrRNRRetry|uverbs.QPAttrSQPSN|uverbs.QPAttrMaxQPRdAtomic)
}

// Connect runs RESET→INIT→RTR→RTS towards remote; local is this QP's own endpoint record
// (its PSN is the first send PSN).
func (q *QP) Connect(a ConnectAttr, local, remote Endpoint) error {
	if err := q.ToInit(a); err != nil {
		return err
	}
	if err := q.ToRTR(a, remote); err != nil {
		return err
	}
	return q.ToRTS(a, local.PSN)
}

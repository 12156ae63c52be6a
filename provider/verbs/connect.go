package verbs

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
	Access          Access // remote access flags of the QP (AccessRemote*)
	GIDIndex        uint8  // local (source) GID index
	PathMTU         uint8  // enum ibv_mtu (MTU1024, ...)
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
	set8(&a.PathMTU, MTU1024)
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

// InitAttr is the RESET→INIT modify for a: its attributes and mask.
func (a ConnectAttr) InitAttr() (QPAttr, QPAttrMask) {
	a = a.Defaults()
	return QPAttr{State: QPStateInit, PkeyIndex: a.PKeyIndex, Port: a.Port, AccessFlags: a.Access},
		QPAttrState | QPAttrPkeyIndex | QPAttrPort | QPAttrAccessFlags
}

// RTRAttr is the INIT→RTR modify towards remote: the address vector (RoCE GRH), path MTU,
// destination QPN, expected receive PSN, responder resources and RNR timer.
func (a ConnectAttr) RTRAttr(remote Endpoint) (QPAttr, QPAttrMask) {
	a = a.Defaults()
	return QPAttr{State: QPStateRTR, PathMTU: a.PathMTU, DestQPN: remote.QPN, RQPSN: remote.PSN,
			MaxDestRdAtomic: a.MaxDestRdAtomic, MinRNRTimer: a.MinRNRTimer,
			AV: Path{DGID: remote.GID, DLID: remote.LID, SGIDIndex: a.GIDIndex, HopLimit: a.HopLimit,
				TrafficClass: a.TrafficClass, FlowLabel: a.FlowLabel, SL: a.SL, IsGlobal: true, Port: a.Port}},
		QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
}

// RTSAttr is the RTR→RTS modify: ACK timeout, retry counts, first send PSN, initiator depth.
func (a ConnectAttr) RTSAttr(sqPSN uint32) (QPAttr, QPAttrMask) {
	a = a.Defaults()
	return QPAttr{State: QPStateRTS, Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry,
			SQPSN: sqPSN, MaxRdAtomic: a.MaxRdAtomic},
		QPAttrState | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrSQPSN | QPAttrMaxQPRdAtomic
}

// ToInit moves a RESET QP to INIT with a's port, pkey index and access flags.
func ToInit(q QP, a ConnectAttr) error {
	attr, mask := a.InitAttr()
	return q.Modify(&attr, mask)
}

// ToRTR moves an INIT QP to RTR towards remote.
func ToRTR(q QP, a ConnectAttr, remote Endpoint) error {
	attr, mask := a.RTRAttr(remote)
	return q.Modify(&attr, mask)
}

// ToRTS moves an RTR QP to RTS with first send PSN sqPSN.
func ToRTS(q QP, a ConnectAttr, sqPSN uint32) error {
	attr, mask := a.RTSAttr(sqPSN)
	return q.Modify(&attr, mask)
}

// Connect runs RESET→INIT→RTR→RTS towards remote; local is the QP's own endpoint record (its
// PSN is the first send PSN).
func Connect(q QP, a ConnectAttr, local, remote Endpoint) error {
	if err := ToInit(q, a); err != nil {
		return err
	}
	if err := ToRTR(q, a, remote); err != nil {
		return err
	}
	return ToRTS(q, a, local.PSN)
}

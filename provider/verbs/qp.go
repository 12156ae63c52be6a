package verbs

// QPState is enum ibv_qp_state.
type QPState uint32

// QP states.
const (
	QPStateReset QPState = iota // IBV_QPS_RESET
	QPStateInit                 // IBV_QPS_INIT
	QPStateRTR                  // IBV_QPS_RTR
	QPStateRTS                  // IBV_QPS_RTS
	QPStateSQD                  // IBV_QPS_SQD
	QPStateSQE                  // IBV_QPS_SQE
	QPStateErr                  // IBV_QPS_ERR
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return "QPS_UNKNOWN"
}

// QPCap is struct ibv_qp_cap: what a QP is asked for at creation and what it reports back
// (rounded up as the provider sized its rings).
type QPCap struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// QPInitAttr is struct ibv_qp_init_attr for an RC QP.
type QPInitAttr struct {
	SendCQ, RecvCQ CQ
	Cap            QPCap
	// SigAll makes every send WR signaled (sq_sig_all).
	SigAll bool
	// Handle is the user handle the kernel echoes in the QP's async events (a C provider
	// passes its struct ibv_qp pointer, which libibverbs hands back in ibv_async_event); 0
	// lets the implementation choose one.
	Handle uint64
}

// QPAttrMask is enum ibv_qp_attr_mask: which fields of a QPAttr a modify or query uses.
type QPAttrMask uint32

// QP attribute mask bits.
const (
	QPAttrState            QPAttrMask = 1 << 0  // IBV_QP_STATE
	QPAttrCurState         QPAttrMask = 1 << 1  // IBV_QP_CUR_STATE
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2  // IBV_QP_EN_SQD_ASYNC_NOTIFY
	QPAttrAccessFlags      QPAttrMask = 1 << 3  // IBV_QP_ACCESS_FLAGS
	QPAttrPkeyIndex        QPAttrMask = 1 << 4  // IBV_QP_PKEY_INDEX
	QPAttrPort             QPAttrMask = 1 << 5  // IBV_QP_PORT
	QPAttrQkey             QPAttrMask = 1 << 6  // IBV_QP_QKEY
	QPAttrAV               QPAttrMask = 1 << 7  // IBV_QP_AV
	QPAttrPathMTU          QPAttrMask = 1 << 8  // IBV_QP_PATH_MTU
	QPAttrTimeout          QPAttrMask = 1 << 9  // IBV_QP_TIMEOUT
	QPAttrRetryCnt         QPAttrMask = 1 << 10 // IBV_QP_RETRY_CNT
	QPAttrRNRRetry         QPAttrMask = 1 << 11 // IBV_QP_RNR_RETRY
	QPAttrRQPSN            QPAttrMask = 1 << 12 // IBV_QP_RQ_PSN
	QPAttrMaxQPRdAtomic    QPAttrMask = 1 << 13 // IBV_QP_MAX_QP_RD_ATOMIC
	QPAttrAltPath          QPAttrMask = 1 << 14 // IBV_QP_ALT_PATH
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15 // IBV_QP_MIN_RNR_TIMER
	QPAttrSQPSN            QPAttrMask = 1 << 16 // IBV_QP_SQ_PSN
	QPAttrMaxDestRdAtomic  QPAttrMask = 1 << 17 // IBV_QP_MAX_DEST_RD_ATOMIC
	QPAttrPathMigState     QPAttrMask = 1 << 18 // IBV_QP_PATH_MIG_STATE
	QPAttrCap              QPAttrMask = 1 << 19 // IBV_QP_CAP
	QPAttrDestQPN          QPAttrMask = 1 << 20 // IBV_QP_DEST_QPN
	QPAttrRateLimit        QPAttrMask = 1 << 25 // IBV_QP_RATE_LIMIT
)

// Path MTUs (enum ibv_mtu).
const (
	MTU256  uint8 = 1 // IBV_MTU_256
	MTU512  uint8 = 2 // IBV_MTU_512
	MTU1024 uint8 = 3 // IBV_MTU_1024
	MTU2048 uint8 = 4 // IBV_MTU_2048
	MTU4096 uint8 = 5 // IBV_MTU_4096
)

// MTUBytes is the size of an enum ibv_mtu value in bytes (0 for an invalid value).
func MTUBytes(mtu uint8) int {
	if mtu < MTU256 || mtu > MTU4096 {
		return 0
	}
	return 128 << mtu
}

// Path is an address vector (struct ibv_ah_attr with its struct ibv_global_route): the
// remote port and, for RoCE, the GRH.
type Path struct {
	DGID         [16]byte
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	DLID         uint16
	SL           uint8
	SrcPathBits  uint8
	StaticRate   uint8
	IsGlobal     bool // the GRH fields are valid (always for RoCE)
	Port         uint8
}

// QPAttr holds every QP attribute the verbs API lets an application modify or query (struct
// ibv_qp_attr). Which fields matter is decided by the QPAttrMask passed alongside.
type QPAttr struct {
	State            QPState // QPAttrState
	CurState         QPState // QPAttrCurState
	EnSQDAsyncNotify bool    // QPAttrEnSQDAsyncNotify
	AccessFlags      Access
	PkeyIndex        uint16
	Port             uint8
	Qkey             uint32
	AV               Path // QPAttrAV
	PathMTU          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	RQPSN            uint32
	MaxRdAtomic      uint8
	AltPath          Path // QPAttrAltPath, with AltPkeyIndex, AltPort, AltTimeout
	AltPkeyIndex     uint16
	AltPort          uint8
	AltTimeout       uint8
	MinRNRTimer      uint8
	SQPSN            uint32
	MaxDestRdAtomic  uint8
	PathMigState     uint8
	Cap              QPCap // QPAttrCap (query only on RC)
	DestQPN          uint32
	RateLimit        uint32 // QPAttrRateLimit (extended modify only)

	// Query-only fields.
	SQDraining bool
	SigAll     bool
}

// Access are enum ibv_access_flags, for MRs and QPs.
type Access uint32

// Access flags.
const (
	AccessLocalWrite      Access = 1 << 0  // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite     Access = 1 << 1  // IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead      Access = 1 << 2  // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic    Access = 1 << 3  // IBV_ACCESS_REMOTE_ATOMIC
	AccessMWBind          Access = 1 << 4  // IBV_ACCESS_MW_BIND
	AccessZeroBased       Access = 1 << 5  // IBV_ACCESS_ZERO_BASED
	AccessOnDemand        Access = 1 << 6  // IBV_ACCESS_ON_DEMAND
	AccessHugeTLB         Access = 1 << 7  // IBV_ACCESS_HUGETLB
	AccessRelaxedOrdering Access = 1 << 20 // IBV_ACCESS_RELAXED_ORDERING
)

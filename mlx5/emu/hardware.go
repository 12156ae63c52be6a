package emu

// hardware is what the emulated kernel driver needs from the device model: the mlx5 firmware
// commands it issues (create/destroy mkey, CQ, QP, modify QP) and the UAR pages it maps into
// user space. The NIC reports asynchronous happenings through the hwEvents callbacks the
// driver installs. An adapter binds it to package nic.
type hardware interface {
	// regMR creates a memory key for [addr, addr+length) of this process seen at iova.
	regMR(pdn uint32, addr, length, iova uint64, access uint32) (lkey, rkey uint32, err error)
	deregMR(lkey uint32) error
	createCQ(s cqSpec) (cqn uint32, err error)
	destroyCQ(cqn uint32) error
	createQP(s qpSpec) (qpn uint32, err error)
	// modifyQP applies a validated transition with the QP's accumulated attributes.
	modifyQP(qpn uint32, cur, next QPState, a *qpAttr) error
	// qpState is the QP's state as the hardware holds it (it moves to ERR on its own).
	qpState(qpn uint32) QPState
	destroyQP(qpn uint32) error
	// allocUAR and freeUAR manage the UAR pages a context maps.
	allocUAR() (uarPage, error)
	freeUAR(u uarPage) error
	portUp(port int) bool
	close() error
}

// hwEvents are the NIC's notifications to the driver, from the NIC's goroutines.
type hwEvents struct {
	completion func(cqn uint32)            // an armed CQ got a CQE: one comp event
	cqError    func(cqn uint32)            // CQ overrun
	qpEvent    func(qpn, event uint32)     // QP moved to ERR by the hardware: its async event
	portChange func(port int, active bool) // link state of a port changed
	fatal      func()                      // the device died: IBV_EVENT_DEVICE_FATAL
}

// cqSpec is the mlx5 create_cq: the user's CQE buffer and doorbell record.
type cqSpec struct {
	bufAddr, dbAddr uint64
	ncqe            uint32  // power of two
	cqeSize         uint32  // 64 (128 is refused)
	uar             uarPage // the page whose CQ doorbell arms this CQ
}

// uarPage is one UAR page of the device.
type uarPage interface {
	Mem() []byte
	PageID() uint32 // the device's index of the page (the QP and CQ contexts' uar_page)
}

// qpSpec is the mlx5 create_qp for RC: one user buffer holding the RQ then the SQ, the
// doorbell record, and the completion queues.
type qpSpec struct {
	pdn              uint32
	bufAddr, dbAddr  uint64
	sqWQECnt         uint32 // WQEBBs, power of two
	rqWQECnt         uint32 // power of two, or 0
	rqWQEShift       uint32
	sendCQN, recvCQN uint32
	sqSigAll         bool
	uar              uarPage // the UAR page holding the QP's blue-flame register
	bfreg            int     // register 0..3 within that page
	sharedBfreg      bool    // the register is shared with other QPs (medium latency, bfreg 0)
	anyBfreg         bool    // a dynamic page: the library picks the register (bfreg unused)
	maxSendSGE       uint32
	maxRecvSGE       uint32
	maxInline        uint32
	userIndex        uint32 // QPC user_index (CQE version 1)
}

// qpAttr is the RC subset of struct ib_qp_attr the driver keeps per QP.
type qpAttr struct {
	state, curState QPState
	accessFlags     uint32
	pkeyIndex       uint16
	port            uint8
	qkey            uint32
	av              addrVector
	pathMTU         MTU
	timeout         uint8
	retryCnt        uint8
	rnrRetry        uint8
	rqPSN, sqPSN    uint32
	maxRdAtomic     uint8
	maxDestRdAtomic uint8
	minRNRTimer     uint8
	destQPN         uint32
	pathMigState    uint8
}

// addrVector is the primary path (struct ib_uverbs_qp_dest for RoCE: GRH always present).
type addrVector struct {
	dgid         [16]byte
	flowLabel    uint32
	sgidIndex    uint8
	hopLimit     uint8
	trafficClass uint8
	sl           uint8
	staticRate   uint8
	isGlobal     bool
	portNum      uint8
}

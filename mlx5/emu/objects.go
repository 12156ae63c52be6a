package emu

import (
	"sync"
	"sync/atomic"
)

// pdObj is a protection domain (struct ib_pd); usecnt counts the MRs and QPs in it, which
// make dealloc_pd fail with EBUSY, as ib_destroy_usecnt does.
type pdObj struct {
	pdn    uint32
	usecnt atomic.Int32
}

// mrObj is a registered memory region.
type mrObj struct {
	pd                 *pdObj
	addr, length, iova uint64
	access             uint32
	lkey, rkey         uint32
}

// cqObj is a completion queue; usecnt counts the QPs that use it (EBUSY on destroy).
type cqObj struct {
	file       *File
	handle     uint32
	userHandle uint64
	cqn        uint32
	ncqe       uint32
	channel    *eventQueue // nil without a completion channel
	usecnt     atomic.Int32

	// evMu orders raising an event (count, then queue) against destroy (withdraw the
	// unread ones, then report): after destroy no event of the CQ is raised (dead).
	evMu        sync.Mutex
	dead        bool
	compEvents  atomic.Uint32 // comp_events_reported in destroy_cq's response
	asyncEvents atomic.Uint32 // async_events_reported
}

// qpObj is an RC queue pair. The attributes are changed under mu by modify_qp; the state
// the hardware may move to ERR on its own is read from the NIC.
type qpObj struct {
	file       *File
	handle     uint32
	userHandle uint64
	qpn        uint32
	pd         *pdObj
	sendCQ     *cqObj
	recvCQ     *cqObj
	cap        qpCap
	sqSigAll   bool
	bfreg      uint32 // net bfreg index

	mu   sync.Mutex
	attr qpAttr

	evMu   sync.Mutex // as cqObj.evMu
	dead   bool
	events atomic.Uint32 // events_reported in destroy_qp's response
}

// qpCap is struct ib_qp_cap as the QP was created.
type qpCap struct {
	maxSendWR, maxRecvWR, maxSendSGE, maxRecvSGE, maxInline uint32
}

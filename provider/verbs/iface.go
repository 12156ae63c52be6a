package verbs

import "context"

// The interfaces below are the verbs objects. An implementation's objects only work with its
// own kind: a QP takes CQs of the context that created it, an MR belongs to the PD it was
// registered in. Implementations check this and return ErrInvalidArgument.
//
// Concurrency is that of libibverbs with one lock per queue: the data path (PostSend,
// PostRecv on one QP; Poll on one CQ) must be serialised by the caller per object; posting
// and polling may run concurrently; control verbs may run concurrently with each other but
// not with the data path of the object they destroy.

// Context is an open device (struct ibv_context).
type Context interface {
	// Name is the device name (ibv_get_device_name).
	Name() string
	QueryDevice() (DeviceAttr, error)
	QueryPort(port uint8) (PortAttr, error)
	// GIDs is the populated GID table of every port.
	GIDs() ([]GID, error)
	AllocPD() (PD, error)
	CreateCompChannel() (CompChannel, error)
	CreateCQ(a CQInitAttr) (CQ, error)
	// AsyncFD is the descriptor that becomes readable when an asynchronous event is pending
	// (ibv_context.async_fd); GetAsyncEvent reads it.
	AsyncFD() int
	// GetAsyncEvent is ibv_get_async_event: it waits until ctx ends for the next event.
	GetAsyncEvent(ctx context.Context) (AsyncEvent, error)
	// Close releases the context; objects still alive are destroyed with it.
	Close() error
}

// PD is a protection domain (struct ibv_pd).
type PD interface {
	// RegMR is ibv_reg_mr over b: the HCA address of b[0] is its virtual address.
	RegMR(b []byte, access Access) (MR, error)
	// RegMRIOVA is ibv_reg_mr_iova2: b is seen by the HCA at iova.
	RegMRIOVA(b []byte, iova uint64, access Access) (MR, error)
	CreateQP(a QPInitAttr) (QP, error)
	Dealloc() error
}

// MR is a registered memory region (struct ibv_mr).
type MR interface {
	LKey() uint32
	RKey() uint32
	// Addr is the first byte's virtual address in this process; IOVA is where the HCA (and
	// remote peers, with RKey) see it.
	Addr() uint64
	IOVA() uint64
	Len() uint64
	// Bytes is the registered memory.
	Bytes() []byte
	// SGE is the scatter/gather entry for Bytes()[off:off+n].
	SGE(off, n int) SGE
	Dereg() error
}

// CQInitAttr is what ibv_create_cq takes.
type CQInitAttr struct {
	// CQE is the least number of completions the CQ must hold.
	CQE int
	// Channel receives the CQ's completion events once it is armed (nil: none).
	Channel    CompChannel
	CompVector uint32
	// Handle is the user handle completion events and async events carry (a C provider
	// passes its struct ibv_cq pointer, which ibv_get_cq_event hands back); 0 lets the
	// implementation choose one.
	Handle uint64
}

// CQ is a completion queue (struct ibv_cq).
type CQ interface {
	// Poll is ibv_poll_cq: it fills wcs with up to len(wcs) completions, oldest first.
	Poll(wcs []WC) (int, error)
	// Arm is ibv_req_notify_cq.
	Arm(solicitedOnly bool) error
	// AckEvents is ibv_ack_cq_events.
	AckEvents(n uint32)
	// Size is the number of completions the CQ holds for the caller (ibv_cq.cqe).
	Size() int
	Destroy() error
}

// QP is an RC queue pair (struct ibv_qp).
type QP interface {
	QPN() uint32
	// Cap is what the QP really provides (rounded up as the provider sized its rings).
	Cap() QPCap
	// PostSend is ibv_post_send for the list wrs, with one doorbell. On error nothing or a
	// prefix was posted, as the error (a *WRError where a WR is to blame) says.
	PostSend(wrs []SendWR) error
	// PostRecv is ibv_post_recv.
	PostRecv(wrs []RecvWR) error
	// Modify is ibv_modify_qp with the fields of a that mask selects.
	Modify(a *QPAttr, mask QPAttrMask) error
	// Query is ibv_query_qp.
	Query(mask QPAttrMask) (QPAttr, error)
	Destroy() error
}

// CompChannel is a completion event channel (struct ibv_comp_channel): a descriptor that
// becomes readable when an armed CQ bound to it has an event.
type CompChannel interface {
	Fd() int
	// GetEvent is ibv_get_cq_event: it waits until ctx ends for the next event and returns
	// its CQ. Every event must be acknowledged with CQ.AckEvents before the CQ is destroyed.
	GetEvent(ctx context.Context) (CQ, error)
	Close() error
}

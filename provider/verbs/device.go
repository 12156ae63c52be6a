package verbs

import (
	"fmt"
	"net"
)

// DeviceAttr is struct ibv_device_attr (what ibv_query_device reports), plus the fields of
// struct ibv_device_attr_ex that an RC provider fills.
type DeviceAttr struct {
	FWVer                  uint64 // major<<32 | minor<<16 | sub-minor, as mlx5 reports it
	NodeGUID               uint64 // in network byte order, as the kernel reports it
	SysImageGUID           uint64
	MaxMRSize              uint64
	PageSizeCap            uint64
	VendorID               uint32
	VendorPartID           uint32
	HWVer                  uint32
	MaxQP                  uint32
	MaxQPWR                uint32
	DeviceCapFlags         uint32
	MaxSGE                 uint32
	MaxSGERd               uint32
	MaxCQ                  uint32
	MaxCQE                 uint32
	MaxMR                  uint32
	MaxPD                  uint32
	MaxQPRdAtom            uint32
	MaxEERdAtom            uint32
	MaxResRdAtom           uint32
	MaxQPInitRdAtom        uint32
	MaxEEInitRdAtom        uint32
	AtomicCap              uint32 // enum ibv_atomic_cap
	MaxEE                  uint32
	MaxRDD                 uint32
	MaxMW                  uint32
	MaxRawIPv6QP           uint32
	MaxRawEthyQP           uint32
	MaxMcastGrp            uint32
	MaxMcastQPAttach       uint32
	MaxTotalMcastQPAttach  uint32
	MaxAH                  uint32
	MaxFMR                 uint32
	MaxMapPerFMR           uint32
	MaxSRQ                 uint32
	MaxSRQWR               uint32
	MaxSRQSGE              uint32
	MaxPkeys               uint16
	LocalCAAckDelay        uint8
	PhysPortCnt            uint8
	CompletionTimestampMax uint64 // ibv_device_attr_ex.completion_timestamp_mask
	HCACoreClock           uint64 // kHz
	DeviceCapFlagsEx       uint64
}

// FWVerString formats FWVer as libmlx5 does ("%d.%d.%04d").
func (a DeviceAttr) FWVerString() string {
	return fmt.Sprintf("%d.%d.%04d", a.FWVer>>32, (a.FWVer>>16)&0xffff, a.FWVer&0xffff)
}

// PortState is enum ibv_port_state.
type PortState uint8

// Port states.
const (
	PortNop         PortState = 0 // IBV_PORT_NOP
	PortDown        PortState = 1 // IBV_PORT_DOWN
	PortInit        PortState = 2 // IBV_PORT_INIT
	PortArmed       PortState = 3 // IBV_PORT_ARMED
	PortActive      PortState = 4 // IBV_PORT_ACTIVE
	PortActiveDefer PortState = 5 // IBV_PORT_ACTIVE_DEFER
)

var portStateNames = [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}

func (s PortState) String() string {
	if int(s) < len(portStateNames) {
		return portStateNames[s]
	}
	return "PORT_STATE_UNKNOWN"
}

// Link layers (IBV_LINK_LAYER_*).
const (
	LinkLayerUnspecified uint8 = 0
	LinkLayerInfiniBand  uint8 = 1
	LinkLayerEthernet    uint8 = 2
)

// PortAttr is struct ibv_port_attr.
type PortAttr struct {
	State         PortState
	MaxMTU        uint8 // enum ibv_mtu
	ActiveMTU     uint8
	GIDTblLen     uint32
	PortCapFlags  uint32
	MaxMsgSize    uint32
	BadPkeyCntr   uint32
	QkeyViolCntr  uint32
	PkeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8
	Flags         uint8
	PortCapFlags2 uint16
}

// GID is one GID table entry.
type GID struct {
	Index int
	Port  uint8
	GID   [16]byte
	// RoCEv2 is true for RoCE v2 (UDP-encapsulated) GIDs.
	RoCEv2 bool
}

// IP returns the GID as an IP address (IPv4-mapped GIDs print as IPv4).
func (g GID) IP() net.IP { return net.IP(g.GID[:]) }

// FindGID returns the GID of port with index idx in gs.
func FindGID(gs []GID, port uint8, idx int) (GID, bool) {
	for _, g := range gs {
		if g.Port == port && g.Index == idx {
			return g, true
		}
	}
	return GID{}, false
}

// FindGIDByIP returns the RoCEv2 GID of port that carries ip (IPv4 GIDs are IPv4-mapped), the
// way perftest and NCCL pick the GID index for an address.
func FindGIDByIP(gs []GID, port uint8, ip net.IP) (GID, bool) {
	want := ip.To16()
	if want == nil {
		return GID{}, false
	}
	for _, g := range gs {
		if g.Port == port && g.RoCEv2 && net.IP(g.GID[:]).Equal(want) {
			return g, true
		}
	}
	return GID{}, false
}

// PreferredGID is the GID a RoCE application should use on port when it was told no index:
// the RoCE v2 GID of an IPv4 address if there is one, then any RoCE v2 GID, then index 0 (on
// a ConnectX index 0 is the RoCE v1 link-local GID, which crosses no router). This is
// perftest's get_best_gid_index preference.
func PreferredGID(gs []GID, port uint8) (GID, bool) {
	var v2, first *GID
	for i := range gs {
		g := &gs[i]
		if g.Port != port {
			continue
		}
		if first == nil || g.Index < first.Index {
			first = g
		}
		if !g.RoCEv2 {
			continue
		}
		if net.IP(g.GID[:]).To4() != nil {
			return *g, true
		}
		if v2 == nil {
			v2 = g
		}
	}
	if v2 != nil {
		return *v2, true
	}
	if first != nil {
		return *first, true
	}
	return GID{}, false
}

// AsyncEventType is enum ibv_event_type.
type AsyncEventType uint32

// Asynchronous event types.
const (
	EventCQErr            AsyncEventType = 0  // IBV_EVENT_CQ_ERR
	EventQPFatal          AsyncEventType = 1  // IBV_EVENT_QP_FATAL
	EventQPReqErr         AsyncEventType = 2  // IBV_EVENT_QP_REQ_ERR
	EventQPAccessErr      AsyncEventType = 3  // IBV_EVENT_QP_ACCESS_ERR
	EventCommEst          AsyncEventType = 4  // IBV_EVENT_COMM_EST
	EventSQDrained        AsyncEventType = 5  // IBV_EVENT_SQ_DRAINED
	EventPathMig          AsyncEventType = 6  // IBV_EVENT_PATH_MIG
	EventPathMigErr       AsyncEventType = 7  // IBV_EVENT_PATH_MIG_ERR
	EventDeviceFatal      AsyncEventType = 8  // IBV_EVENT_DEVICE_FATAL
	EventPortActive       AsyncEventType = 9  // IBV_EVENT_PORT_ACTIVE
	EventPortErr          AsyncEventType = 10 // IBV_EVENT_PORT_ERR
	EventLIDChange        AsyncEventType = 11 // IBV_EVENT_LID_CHANGE
	EventPkeyChange       AsyncEventType = 12 // IBV_EVENT_PKEY_CHANGE
	EventSMChange         AsyncEventType = 13 // IBV_EVENT_SM_CHANGE
	EventSRQErr           AsyncEventType = 14 // IBV_EVENT_SRQ_ERR
	EventSRQLimitReached  AsyncEventType = 15 // IBV_EVENT_SRQ_LIMIT_REACHED
	EventQPLastWQEReached AsyncEventType = 16 // IBV_EVENT_QP_LAST_WQE_REACHED
	EventClientReregister AsyncEventType = 17 // IBV_EVENT_CLIENT_REREGISTER
	EventGIDChange        AsyncEventType = 18 // IBV_EVENT_GID_CHANGE
	EventWQFatal          AsyncEventType = 19 // IBV_EVENT_WQ_FATAL
)

// PortEvent reports whether events of type t name a port (the others name a QP, CQ, SRQ or
// WQ, except EventDeviceFatal, which names the device).
func (t AsyncEventType) PortEvent() bool {
	switch t {
	case EventPortActive, EventPortErr, EventLIDChange, EventPkeyChange, EventSMChange,
		EventClientReregister, EventGIDChange:
		return true
	}
	return false
}

// AsyncEvent is an asynchronous event (struct ibv_async_event). Exactly one of QP, CQ and
// Port is set, by the event's type; EventDeviceFatal sets none.
type AsyncEvent struct {
	Type AsyncEventType
	QP   QP
	CQ   CQ
	Port int
}

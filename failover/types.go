package failover

import "github.com/shift-rdma/shift/provider"

// Value types of package provider, re-exported so an application switches to SHIFT by changing
// one import.
type (
	// SendWR is provider.SendWR.
	SendWR = provider.SendWR
	// RecvWR is provider.RecvWR.
	RecvWR = provider.RecvWR
	// SGE is provider.SGE.
	SGE = provider.SGE
	// WC is provider.WC.
	WC = provider.WC
	// WCStatus is provider.WCStatus.
	WCStatus = provider.WCStatus
	// WCOpcode is provider.WCOpcode.
	WCOpcode = provider.WCOpcode
	// WROpcode is provider.WROpcode.
	WROpcode = provider.WROpcode
	// SendFlags is provider.SendFlags.
	SendFlags = provider.SendFlags
	// QPCap is provider.QPCap.
	QPCap = provider.QPCap
	// ConnectAttr is provider.ConnectAttr.
	ConnectAttr = provider.ConnectAttr
	// Endpoint is provider.Endpoint.
	Endpoint = provider.Endpoint
	// Buffer is provider.Buffer.
	Buffer = provider.Buffer
	// GID is provider.GID.
	GID = provider.GID
)

// Opcodes, flags and statuses, as in package provider.
const (
	WRRDMAWrite        = provider.WRRDMAWrite
	WRRDMAWriteWithImm = provider.WRRDMAWriteWithImm
	WRSend             = provider.WRSend
	WRSendWithImm      = provider.WRSendWithImm
	WRRDMARead         = provider.WRRDMARead
	WRAtomicCmpAndSwp  = provider.WRAtomicCmpAndSwp
	WRAtomicFetchAdd   = provider.WRAtomicFetchAdd

	SendFence     = provider.SendFence
	SendSignaled  = provider.SendSignaled
	SendSolicited = provider.SendSolicited
	SendInline    = provider.SendInline

	// SendIneligible marks a WR that must not be retransmitted on the backup NIC (for example
	// because the application verifies its effect by other means). It is bit 30 of the send
	// flags, a bit the provider never encodes: SHIFT clears it before posting. If such a WR is
	// outstanding when its QP fails, the fallback is refused and the application gets the
	// original error completion, as without SHIFT.
	SendIneligible SendFlags = 1 << 30

	WCSuccess     = provider.WCSuccess
	WCWRFlushErr  = provider.WCWRFlushErr
	WCRetryExcErr = provider.WCRetryExcErr
	WCLocProtErr  = provider.WCLocProtErr

	WCWithImm = provider.WCWithImm

	WCSend            = provider.WCSend
	WCRDMAWrite       = provider.WCRDMAWrite
	WCRDMARead        = provider.WCRDMARead
	WCCompSwap        = provider.WCCompSwap
	WCFetchAdd        = provider.WCFetchAdd
	WCRecv            = provider.WCRecv
	WCRecvRDMAWithImm = provider.WCRecvRDMAWithImm

	AccessLocalWrite   = provider.AccessLocalWrite
	AccessRemoteWrite  = provider.AccessRemoteWrite
	AccessRemoteRead   = provider.AccessRemoteRead
	AccessRemoteAtomic = provider.AccessRemoteAtomic
)

// NewBuffer is provider.NewBuffer.
func NewBuffer(size int) (*Buffer, error) { return provider.NewBuffer(size) }

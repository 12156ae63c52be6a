package emu

// DeviceCaps are the limits the emulated HCA reports in query_device and enforces on
// create/modify commands. DefaultCaps holds what a ConnectX-6 (MT4123) with a current
// firmware reports through ibv_devinfo -v.
type DeviceCaps struct {
	FWVer            uint64 // packed as mlx5 does: major<<32 | minor<<16 | subminor
	VendorID         uint32
	VendorPartID     uint32
	HWVer            uint32
	MaxMRSize        uint64
	PageSizeCap      uint64
	MaxQP            uint32
	MaxQPWR          uint32 // 1 << log_max_qp_sz
	DeviceCapFlags   uint64
	MaxSGE           uint32
	MaxSGERd         uint32
	MaxCQ            uint32
	MaxCQE           uint32 // (1 << log_max_cq_sz) - 1
	MaxMR            uint32
	MaxPD            uint32
	MaxQPRdAtom      uint32 // 1 << log_max_ra_res_qp
	MaxResRdAtom     uint32
	MaxQPInitRdAtom  uint32 // 1 << log_max_ra_req_qp
	AtomicCap        uint32 // IB_ATOMIC_HCA
	MaxMW            uint32
	MaxMcastGrp      uint32
	MaxMcastQPAttach uint32
	MaxTotalMcastQP  uint32
	MaxAH            uint32
	MaxSRQ           uint32
	MaxSRQWR         uint32
	MaxSRQSGE        uint32
	MaxPKeys         uint16
	LocalCAAckDelay  uint8
	MaxInlineData    uint32 // what the device accepts as max_inline_data at create_qp
	CompVectors      uint32
	// CQEVersion0Only is a device whose cqe_version capability is 0: every context gets CQE
	// version 0, whatever it asks (mlx5_ib answers min(requested, capability)).
	CQEVersion0Only bool
}

// Device capability flags reported (enum ib_device_cap_flags).
const (
	devCapResizeMaxWR   = 1 << 0
	devCapBadPKeyCntr   = 1 << 1
	devCapBadQKeyCntr   = 1 << 2
	devCapPortActiveEvt = 1 << 10
	devCapSysImageGUID  = 1 << 11
	devCapRCRNRNakGen   = 1 << 12
	devCapBlockMulticas = 1 << 22
	devCapMemMgtExt     = 1 << 21
)

// DefaultCaps is a ConnectX-6.
var DefaultCaps = DeviceCaps{
	FWVer:            20<<32 | 39<<16 | 1002,
	VendorID:         0x02c9, // Mellanox
	VendorPartID:     4123,   // MT4123 ConnectX-6
	MaxMRSize:        ^uint64(0),
	PageSizeCap:      ^uint64(0xfff),
	MaxQP:            1 << 18,
	MaxQPWR:          1 << 15,
	DeviceCapFlags:   devCapResizeMaxWR | devCapBadPKeyCntr | devCapBadQKeyCntr | devCapPortActiveEvt | devCapSysImageGUID | devCapRCRNRNakGen | devCapMemMgtExt | devCapBlockMulticas,
	MaxSGE:           30,
	MaxSGERd:         30,
	MaxCQ:            1 << 24,
	MaxCQE:           1<<22 - 1,
	MaxMR:            1 << 24,
	MaxPD:            1 << 24,
	MaxQPRdAtom:      16,
	MaxResRdAtom:     1 << 22,
	MaxQPInitRdAtom:  16,
	AtomicCap:        1, // IB_ATOMIC_HCA
	MaxMW:            1 << 24,
	MaxMcastGrp:      1 << 21,
	MaxMcastQPAttach: 240,
	MaxTotalMcastQP:  503316480,
	MaxAH:            1<<31 - 1,
	MaxSRQ:           1 << 23,
	MaxSRQWR:         1<<15 - 1,
	MaxSRQSGE:        31,
	MaxPKeys:         128,
	LocalCAAckDelay:  16,
	MaxInlineData:    512,
	CompVectors:      8,
}

// MTU is an IB MTU code (enum ib_mtu): 1=256 … 5=4096.
type MTU uint32

// MTU codes.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes is the MTU in bytes, 0 for an invalid code.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// mtuForNetdev is what mlx5 reports as active_mtu on RoCE: the largest IB MTU that fits in
// the netdev MTU minus the RoCE headers (iboe_get_mtu in include/rdma/ib_addr.h subtracts
// IB_GRH_BYTES + IB_BTH_BYTES + IB_EXT_ATOMICETH_BYTES + IB_ICRC_BYTES = 40+12+28+4).
func mtuForNetdev(netdevMTU int) MTU {
	mtu := netdevMTU - (40 + 12 + 28 + 4)
	switch {
	case mtu >= 4096:
		return MTU4096
	case mtu >= 2048:
		return MTU2048
	case mtu >= 1024:
		return MTU1024
	case mtu >= 512:
		return MTU512
	case mtu >= 256:
		return MTU256
	}
	return 0
}

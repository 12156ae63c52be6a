package emu

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/uverbs"
)

// queryDevice fills struct ib_uverbs_query_device_resp (copy_query_dev_fields).
func (d *Device) queryDevice() uverbs.QueryDeviceResp {
	c := &d.caps
	return uverbs.QueryDeviceResp{
		Fw_ver:                    c.FWVer,
		Node_guid:                 bigEndianWord(d.nodeGUID),
		Sys_image_guid:            bigEndianWord(d.nodeGUID),
		Max_mr_size:               c.MaxMRSize,
		Page_size_cap:             c.PageSizeCap,
		Vendor_id:                 c.VendorID,
		Vendor_part_id:            c.VendorPartID,
		Hw_ver:                    c.HWVer,
		Max_qp:                    c.MaxQP,
		Max_qp_wr:                 c.MaxQPWR,
		Device_cap_flags:          uint32(c.DeviceCapFlags),
		Max_sge:                   c.MaxSGE,
		Max_sge_rd:                c.MaxSGERd,
		Max_cq:                    c.MaxCQ,
		Max_cqe:                   c.MaxCQE,
		Max_mr:                    c.MaxMR,
		Max_pd:                    c.MaxPD,
		Max_qp_rd_atom:            c.MaxQPRdAtom,
		Max_res_rd_atom:           c.MaxResRdAtom,
		Max_qp_init_rd_atom:       c.MaxQPInitRdAtom,
		Atomic_cap:                c.AtomicCap,
		Max_mw:                    c.MaxMW,
		Max_mcast_grp:             c.MaxMcastGrp,
		Max_mcast_qp_attach:       c.MaxMcastQPAttach,
		Max_total_mcast_qp_attach: c.MaxTotalMcastQP,
		Max_ah:                    c.MaxAH,
		Max_srq:                   c.MaxSRQ,
		Max_srq_wr:                c.MaxSRQWR,
		Max_srq_sge:               c.MaxSRQSGE,
		Max_pkeys:                 c.MaxPKeys,
		Local_ca_ack_delay:        c.LocalCAAckDelay,
		Phys_port_cnt:             uint8(len(d.ports)),
	}
}

// queryDeviceEx fills struct ib_uverbs_ex_query_device_resp (ib_uverbs_ex_query_device).
func (d *Device) queryDeviceEx() uverbs.ExQueryDeviceResp {
	r := uverbs.ExQueryDeviceResp{Base: d.queryDevice()}
	r.Device_cap_flags_ex = d.caps.DeviceCapFlags
	r.Response_length = uint32(sizeOf[uverbs.ExQueryDeviceResp]())
	return r
}

// Port capability flags a RoCE mlx5 port reports (enum ib_port_capability_mask_bits).
const (
	portCapCMSup          = 1 << 16
	portCapIPBasedGIDs    = 1 << 26
	portCapDeviceMgmtSup  = 1 << 19
	portCapVendorClassSup = 1 << 24
	roceMaxMsgSz          = 1 << 30
	physStateLinkUp       = 5
	physStateDisabled     = 3
	width4X               = 2
	speedEDR              = 32 // 25 Gb/s per lane: 4X EDR is 100 Gb/s
)

// queryPort fills struct ib_uverbs_query_port_resp for port num (mlx5_query_port_roce).
func (d *Device) queryPort(num int) (uverbs.QueryPortResp, error) {
	p, ok := d.port(num)
	if !ok {
		return uverbs.QueryPortResp{}, fmt.Errorf("query_port %d: %w", num, unix.EINVAL)
	}
	r := uverbs.QueryPortResp{
		Port_cap_flags: portCapCMSup | portCapIPBasedGIDs | portCapDeviceMgmtSup | portCapVendorClassSup,
		Max_msg_sz:     roceMaxMsgSz,
		Gid_tbl_len:    gidTableLen,
		Pkey_tbl_len:   1,
		Max_mtu:        uint8(MTU4096),
		Active_mtu:     uint8(mtuForNetdev(p.NetdevMTU)),
		Max_vl_num:     4,
		Active_width:   width4X,
		Active_speed:   speedEDR,
		Link_layer:     uverbs.LinkLayerEthernet,
	}
	if d.hw.portUp(num) {
		r.State, r.Phys_state = uverbs.PortActive, physStateLinkUp
	} else {
		r.State, r.Phys_state = uverbs.PortDown, physStateDisabled
	}
	return r, nil
}

// gidTableLen is the GID table size a ConnectX-6 reports per RoCE port; only entry 0 is
// populated here (the RoCEv2 GID of the port's IPv4 address).
const gidTableLen = 256

// gidEntries lists the populated GIDs of every port (struct ib_uverbs_gid_entry).
func (d *Device) gidEntries(ifindex func(netdev string) uint32) []uverbs.GIDEntry {
	var out []uverbs.GIDEntry
	for _, p := range d.ports {
		g := p.GID()
		e := uverbs.GIDEntry{Gid_index: 0, Port_num: uint32(p.Num), Gid_type: uverbs.GIDTypeRoCEv2}
		// The GID is 16 raw bytes in network order; the struct holds them as two u64 words.
		e.Gid[0] = binary.NativeEndian.Uint64(g[0:8])
		e.Gid[1] = binary.NativeEndian.Uint64(g[8:16])
		if ifindex != nil {
			e.Netdev_ifindex = ifindex(p.Netdev)
		}
		out = append(out, e)
	}
	return out
}

// bigEndianWord is v as a __be64 field holds it: its bytes in memory most significant first
// (the kernel's node_guid and sys_image_guid are __be64; libibverbs prints them as read).
func bigEndianWord(v uint64) uint64 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return binary.NativeEndian.Uint64(b[:])
}

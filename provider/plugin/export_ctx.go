package main

/*
#include "plugin.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/internal/cshared"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
	"github.com/shift-rdma/shift/uverbs"
)

// guard turns a panic in an exported function into EIO (with the stack on stderr) instead of
// the end of the application.
func guard(op string, ret *C.int) {
	if r := recover(); r != nil {
		fmt.Fprintf(os.Stderr, "libmlx5-shift: %s: internal error: %v\n%s", op, r, debug.Stack())
		*ret = C.int(unix.EIO)
	}
}

// fail returns err's errno for C, printing the error when SHIFT_DEBUG=1.
func fail(op string, err error) C.int {
	if c, _ := loadConfig(); c.debug {
		fmt.Fprintf(os.Stderr, "libmlx5-shift: %s: %v\n", op, err)
	}
	return C.int(verbs.Errno(err))
}

// failLoud is fail for errors a user must see whatever SHIFT_DEBUG says: a device that cannot
// be opened at all.
func failLoud(op string, err error) C.int {
	fmt.Fprintf(os.Stderr, "libmlx5-shift: %s: %v\n", op, err)
	return C.int(verbs.Errno(err))
}

//export shiftGoOpenContext
func shiftGoOpenContext(sctx *C.struct_shift_context, ibdev, uv *C.char, cmdFD C.int, mode C.int) (ret C.int) {
	defer guard("open device", &ret)
	name := C.GoString(ibdev)
	op := "open " + name
	cfg, err := loadConfig()
	if err != nil {
		return failLoud(op, err)
	}
	c := &devctx{sctx: sctx, name: name, emu: mode == C.SHIFT_MODE_EMU}
	if c.emu {
		if err := registerEmulated(); err != nil {
			return failLoud(op, err)
		}
		if c.prov, err = provider.OpenWith(name, cfg.env.Provider); err != nil {
			return failLoud(op, err)
		}
	} else {
		if c.prov, err = openHardware(name, C.GoString(uv), int(cmdFD), cfg.env.Provider); err != nil {
			return failLoud(op, err)
		}
	}
	c.v = c.prov
	if cfg.shift {
		opts, err := failoverOptions(cfg, name)
		if err == nil {
			c.fo, err = failover.OpenContext(c.prov, opts)
		}
		if err != nil {
			c.prov.Close()
			return failLoud(op+" with SHIFT", err)
		}
		c.v = c.fo
		if cfg.debug {
			// Once per device: where its link-down events come from, or why none do.
			fmt.Fprintf(os.Stderr, "libmlx5-shift: %s: link watch: %s\n", name, c.fo.LinkWatch())
		}
		if err := c.fo.ControlErr(); err != nil {
			// The device works without it; shiftctl inject and switch cannot reach it.
			fmt.Fprintf(os.Stderr, "libmlx5-shift: %s: SHIFT_INJECT_SHM=1 but no control file: %v\n", name, err)
		}
		if err := c.fo.StatusErr(); err != nil {
			// The device works without it; shiftctl status and metrics do not see it.
			fmt.Fprintf(os.Stderr, "libmlx5-shift: %s: no status file: %v\n", name, err)
		}
	}
	// libibverbs' ibv_get_async_event reads async_fd without polling first and expects the
	// read to wait, as on the kernel's file; the Go API's descriptor is non-blocking.
	if err := unix.SetNonblock(c.v.AsyncFD(), false); err != nil {
		c.v.Close()
		return failLoud(op+": clear O_NONBLOCK on the async fd", err)
	}
	// The application's signal handlers must not run on the Go runtime's stacks
	// (internal/cshared).
	if c.sigRelease, err = cshared.KeepHandlersOnStack(); err != nil {
		c.v.Close()
		return failLoud(op, err)
	}
	sctx._go = handleOf(c)
	sctx.vctx.context.async_fd = C.int(c.v.AsyncFD())
	sctx.vctx.context.num_comp_vectors = C.int(max(c.prov.NumCompVectors(), 1))
	return 0
}

// openHardware opens a real device's context on a duplicate of the command fd libibverbs
// opened (libibverbs closes its own at ibv_close_device; the context closes the duplicate).
func openHardware(name, uv string, cmdFD int, opts provider.Options) (*provider.Context, error) {
	devs, err := uverbs.DefaultSysfs().Devices()
	if err != nil {
		return nil, err
	}
	for _, d := range devs {
		if d.Name != name && d.Uverbs != uv {
			continue
		}
		fd, err := unix.FcntlInt(uintptr(cmdFD), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("dup command fd: %w", err)
		}
		f := uverbs.NewCdev(fd, d.Path)
		p, err := provider.OpenFileWith(d, f, opts)
		if err != nil {
			f.Close()
			return nil, err
		}
		return p, nil
	}
	return nil, fmt.Errorf("%s (%s) not in sysfs: %w", name, uv, verbs.ErrNotFound)
}

//export shiftGoCloseContext
func shiftGoCloseContext(sctx *C.struct_shift_context) {
	var ret C.int
	defer guard("close device", &ret)
	c := valueOf[*devctx](sctx._go)
	if cfg, _ := loadConfig(); cfg.debug && c.fo != nil {
		fmt.Fprintf(os.Stderr, "libmlx5-shift: %s: SHIFT %+v\n", c.name, c.fo.Stats())
	}
	if err := c.v.Close(); err != nil {
		fail("close "+c.name, err)
	}
	c.sigRelease()
	release(sctx._go)
}

//export shiftGoQueryDevice
func shiftGoQueryDevice(sctx *C.struct_shift_context, a *C.struct_ibv_device_attr_ex) (ret C.int) {
	defer guard("query_device", &ret)
	c := valueOf[*devctx](sctx._go)
	d, err := c.v.QueryDevice()
	if err != nil {
		return fail("query_device "+c.name, err)
	}
	o := &a.orig_attr
	fw := unsafe.Slice((*byte)(unsafe.Pointer(&o.fw_ver[0])), len(o.fw_ver))
	copy(fw[:len(fw)-1], d.FWVerString())
	o.node_guid, o.sys_image_guid = C.__be64(d.NodeGUID), C.__be64(d.SysImageGUID)
	o.max_mr_size, o.page_size_cap = C.uint64_t(d.MaxMRSize), C.uint64_t(d.PageSizeCap)
	o.vendor_id, o.vendor_part_id, o.hw_ver = C.uint32_t(d.VendorID), C.uint32_t(d.VendorPartID), C.uint32_t(d.HWVer)
	o.max_qp, o.max_qp_wr = C.int(d.MaxQP), C.int(d.MaxQPWR)
	o.device_cap_flags = C.uint(d.DeviceCapFlags)
	o.max_sge, o.max_sge_rd = C.int(d.MaxSGE), C.int(d.MaxSGERd)
	o.max_cq, o.max_cqe, o.max_mr, o.max_pd = C.int(d.MaxCQ), C.int(d.MaxCQE), C.int(d.MaxMR), C.int(d.MaxPD)
	o.max_qp_rd_atom, o.max_ee_rd_atom, o.max_res_rd_atom = C.int(d.MaxQPRdAtom), C.int(d.MaxEERdAtom), C.int(d.MaxResRdAtom)
	o.max_qp_init_rd_atom, o.max_ee_init_rd_atom = C.int(d.MaxQPInitRdAtom), C.int(d.MaxEEInitRdAtom)
	o.atomic_cap = C.enum_ibv_atomic_cap(d.AtomicCap)
	o.max_ee, o.max_rdd, o.max_mw = C.int(d.MaxEE), C.int(d.MaxRDD), C.int(d.MaxMW)
	o.max_raw_ipv6_qp, o.max_raw_ethy_qp = C.int(d.MaxRawIPv6QP), C.int(d.MaxRawEthyQP)
	o.max_mcast_grp, o.max_mcast_qp_attach = C.int(d.MaxMcastGrp), C.int(d.MaxMcastQPAttach)
	o.max_total_mcast_qp_attach, o.max_ah = C.int(d.MaxTotalMcastQPAttach), C.int(d.MaxAH)
	o.max_fmr, o.max_map_per_fmr = C.int(d.MaxFMR), C.int(d.MaxMapPerFMR)
	o.max_srq, o.max_srq_wr, o.max_srq_sge = C.int(d.MaxSRQ), C.int(d.MaxSRQWR), C.int(d.MaxSRQSGE)
	o.max_pkeys, o.local_ca_ack_delay, o.phys_port_cnt = C.uint16_t(d.MaxPkeys), C.uint8_t(d.LocalCAAckDelay), C.uint8_t(d.PhysPortCnt)
	a.completion_timestamp_mask = C.uint64_t(d.CompletionTimestampMax)
	a.hca_core_clock = C.uint64_t(d.HCACoreClock)
	a.device_cap_flags_ex = C.uint64_t(d.DeviceCapFlagsEx)
	return 0
}

//export shiftGoQueryPort
func shiftGoQueryPort(sctx *C.struct_shift_context, port C.uint8_t, a *C.struct_ibv_port_attr) (ret C.int) {
	defer guard("query_port", &ret)
	c := valueOf[*devctx](sctx._go)
	p, err := c.v.QueryPort(uint8(port))
	if err != nil {
		return fail(fmt.Sprintf("query_port %s %d", c.name, port), err)
	}
	a.state = C.enum_ibv_port_state(p.State)
	a.max_mtu, a.active_mtu = C.enum_ibv_mtu(p.MaxMTU), C.enum_ibv_mtu(p.ActiveMTU)
	a.gid_tbl_len = C.int(p.GIDTblLen)
	a.port_cap_flags, a.max_msg_sz = C.uint32_t(p.PortCapFlags), C.uint32_t(p.MaxMsgSize)
	a.bad_pkey_cntr, a.qkey_viol_cntr = C.uint32_t(p.BadPkeyCntr), C.uint32_t(p.QkeyViolCntr)
	a.pkey_tbl_len, a.lid, a.sm_lid = C.uint16_t(p.PkeyTblLen), C.uint16_t(p.LID), C.uint16_t(p.SMLID)
	a.lmc, a.max_vl_num, a.sm_sl = C.uint8_t(p.LMC), C.uint8_t(p.MaxVLNum), C.uint8_t(p.SMSL)
	a.subnet_timeout, a.init_type_reply = C.uint8_t(p.SubnetTimeout), C.uint8_t(p.InitTypeReply)
	a.active_width, a.active_speed, a.phys_state = C.uint8_t(p.ActiveWidth), C.uint8_t(p.ActiveSpeed), C.uint8_t(p.PhysState)
	a.link_layer, a.flags, a.port_cap_flags2 = C.uint8_t(p.LinkLayer), C.uint8_t(p.Flags), C.uint16_t(p.PortCapFlags2)
	return 0
}

// errnoOr is err's errno, or EINVAL for a nil error (a caller that failed for a reason
// of its own).
func errnoOr(err error) C.int {
	if err == nil {
		return C.int(unix.EINVAL)
	}
	return C.int(verbs.Errno(err))
}

var errNotPlugin = errors.New("object of another provider")

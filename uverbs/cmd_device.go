package uverbs

import (
	"encoding/binary"
	"errors"

	"golang.org/x/sys/unix"
)

// Device, port and GID queries. rdma-core 44: ibv_cmd_query_device_any uses the extended write
// QUERY_DEVICE (falling back to the legacy one on EOPNOTSUPP/ENOSYS); ibv_cmd_query_port uses
// the QUERY_PORT ioctl; GIDs come from the QUERY_GID_TABLE / QUERY_GID_ENTRY ioctls, with sysfs
// as the fallback on kernels without them.

// QueryDevice issues the extended write QUERY_DEVICE. The kernel fills as much of the
// response as it knows and says how much in Response_length.
func QueryDevice(f File) (ExQueryDeviceResp, error) {
	var cmd ExQueryDeviceCmd
	var resp ExQueryDeviceResp
	err := WriteEx(f, ExCmdQueryDevice, structBytes(&cmd), nil, structBytes(&resp), nil)
	return resp, err
}

// QueryDeviceLegacy issues the legacy write QUERY_DEVICE.
func QueryDeviceLegacy(f File) (QueryDeviceResp, error) {
	var cmd QueryDeviceCmd
	var resp QueryDeviceResp
	err := Write(f, CmdQueryDevice, structBytes(&cmd), nil, structBytes(&resp), nil)
	return resp, err
}

// QueryPort issues the QUERY_PORT ioctl. The port number is a UVERBS_ATTR_CONST_IN passed as
// 8 inline bytes, as rdma-core's fill_attr_const_in does.
func QueryPort(f File, driverID uint32, port uint8) (QueryPortRespEx, error) {
	var resp QueryPortRespEx
	c := NewIoctl(ObjectDevice, MethodQueryPort, driverID)
	c.InU64(AttrQueryPortPortNum, uint64(port))
	c.Out(AttrQueryPortResp, structBytes(&resp))
	err := c.Exec(f, "ioctl QUERY_PORT")
	return resp, err
}

// QueryPortWrite issues the legacy write QUERY_PORT.
func QueryPortWrite(f File, port uint8) (QueryPortResp, error) {
	cmd := QueryPortCmd{Num: port}
	var resp QueryPortResp
	err := Write(f, CmdQueryPort, structBytes(&cmd), nil, structBytes(&resp), nil)
	return resp, err
}

// GIDBytes returns the raw 16-byte GID of an entry (the kernel stores it as two u64 in
// memory order).
func (g GIDEntry) GIDBytes() [16]byte {
	var b [16]byte
	binary.NativeEndian.PutUint64(b[:8], g.Gid[0])
	binary.NativeEndian.PutUint64(b[8:], g.Gid[1])
	return b
}

// SetGIDBytes stores a raw 16-byte GID into the entry.
func (g *GIDEntry) SetGIDBytes(b [16]byte) {
	g.Gid[0] = binary.NativeEndian.Uint64(b[:8])
	g.Gid[1] = binary.NativeEndian.Uint64(b[8:])
}

// QueryGIDEntry issues the QUERY_GID_ENTRY ioctl for one (port, index).
func QueryGIDEntry(f File, driverID uint32, port, index uint32) (GIDEntry, error) {
	var e GIDEntry
	c := NewIoctl(ObjectDevice, MethodQueryGIDEntry, driverID)
	c.InU64(AttrQueryGIDEntryPort, uint64(port))
	c.InU64(AttrQueryGIDEntryGIDIndex, uint64(index))
	c.InU32(AttrQueryGIDEntryFlags, 0)
	c.Out(AttrQueryGIDEntryRespEntry, structBytes(&e))
	err := c.Exec(f, "ioctl QUERY_GID_ENTRY")
	return e, err
}

// QueryGIDTable issues the QUERY_GID_TABLE ioctl for up to max entries over all ports.
func QueryGIDTable(f File, driverID uint32, max int) ([]GIDEntry, error) {
	esz := sizeOf[GIDEntry]()
	buf := make([]byte, max*esz)
	var n [8]byte
	c := NewIoctl(ObjectDevice, MethodQueryGIDTable, driverID)
	c.InU64(AttrQueryGIDTableEntrySize, uint64(esz))
	c.InU32(AttrQueryGIDTableFlags, 0)
	c.Out(AttrQueryGIDTableRespEntries, buf)
	c.Out(AttrQueryGIDTableRespNumEntries, n[:])
	if err := c.Exec(f, "ioctl QUERY_GID_TABLE"); err != nil {
		return nil, err
	}
	cnt := int(binary.NativeEndian.Uint64(n[:]))
	if cnt > max {
		cnt = max
	}
	out := make([]GIDEntry, cnt)
	for i := range out {
		out[i] = fromBytes[GIDEntry](buf[i*esz:])
	}
	return out, nil
}

// GIDEntriesFromSysfs builds GID entries from a sysfs port description: the fallback for
// kernels without the GID ioctls. netdevIndex maps a netdev name to its ifindex (nil leaves
// it 0).
func GIDEntriesFromSysfs(p PortInfo, netdevIndex func(string) uint32) []GIDEntry {
	out := make([]GIDEntry, 0, len(p.GIDs))
	for _, g := range p.GIDs {
		e := GIDEntry{Gid_index: uint32(g.Index), Port_num: uint32(p.Num), Gid_type: g.GIDType()}
		var raw [16]byte
		copy(raw[:], g.GID.To16())
		e.SetGIDBytes(raw)
		if netdevIndex != nil && g.Netdev != "" {
			e.Netdev_ifindex = netdevIndex(g.Netdev)
		}
		out = append(out, e)
	}
	return out
}

// QueryDeviceAny queries the device as rdma-core's ibv_cmd_query_device_any does: the
// extended write first, the legacy write when the kernel does not know it (EOPNOTSUPP or
// ENOSYS; Response_length then covers only the base struct).
func QueryDeviceAny(f File) (ExQueryDeviceResp, error) {
	resp, err := QueryDevice(f)
	if err == nil || !(errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS)) {
		return resp, err
	}
	base, err := QueryDeviceLegacy(f)
	if err != nil {
		return ExQueryDeviceResp{}, err
	}
	return ExQueryDeviceResp{Base: base, Response_length: uint32(sizeOf[QueryDeviceResp]())}, nil
}

// GIDTable returns the GID entries of a device: the QUERY_GID_TABLE ioctl, or, on kernels
// without it (EPROTONOSUPPORT, EOPNOTSUPP, ENOTTY: the answers rdma-core falls back on), the
// sysfs GID tables in dev. netdevIndex is as for GIDEntriesFromSysfs.
func GIDTable(f File, driverID uint32, max int, dev DeviceInfo, netdevIndex func(string) uint32) ([]GIDEntry, error) {
	es, err := QueryGIDTable(f, driverID, max)
	if err == nil || !(errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTTY)) {
		return es, err
	}
	var out []GIDEntry
	for _, p := range dev.Ports {
		out = append(out, GIDEntriesFromSysfs(p, netdevIndex)...)
	}
	if len(out) > max {
		out = out[:max]
	}
	return out, nil
}

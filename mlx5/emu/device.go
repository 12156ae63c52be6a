package emu

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/shift-rdma/shift/mlx5/emu/nic"
	"github.com/shift-rdma/shift/uverbs"
)

// Port is one port of an emulated HCA: a RoCEv2 port whose only GID (index 0) is the
// IPv4-mapped address of its netdev.
type Port struct {
	Num       int        // 1-based, as verbs numbers ports
	IP        netip.Addr // the netdev's address; the GID is ::ffff:IP for IPv4
	Netdev    string     // the netdev name reported with the GID
	NetdevMTU int        // the netdev MTU; active_mtu follows from it
}

// GID is the port's RoCEv2 GID 0.
func (p *Port) GID() [16]byte {
	return p.IP.As16() // for an IPv4 address this is ::ffff:a.b.c.d
}

// Device is one emulated mlx5 HCA as its kernel driver sees it: capabilities, ports, the
// NIC behind it, and the open files. Events from the NIC are routed here to the file that
// owns the CQ or QP, and port events to every file.
type Device struct {
	name     string
	caps     DeviceCaps
	nodeGUID uint64
	ports    []*Port
	hw       hardware
	nic      *nic.Device

	mu     sync.Mutex
	files  map[*File]struct{}
	cqs    map[uint32]*cqObj
	qps    map[uint32]*qpObj
	nextPD uint32
	closed bool

	beforeQP func() error // DeviceConfig.BeforeCreateQP
	kernel   KernelABI    // DeviceConfig.Kernel
}

// ErrClosed is returned by operations on a closed device or file.
var ErrClosed = errors.New("emu: closed")

// Name is the device name (ibdev), e.g. emlx5_0.
func (d *Device) Name() string { return d.name }

// Ports returns the device's ports, port 1 first.
func (d *Device) Ports() []*Port { return d.ports }

// NodeGUID is the device's node GUID.
func (d *Device) NodeGUID() uint64 { return d.nodeGUID }

// Caps returns the capabilities the device reports.
func (d *Device) Caps() DeviceCaps { return d.caps }

func (d *Device) port(num int) (*Port, bool) {
	if num < 1 || num > len(d.ports) {
		return nil, false
	}
	return d.ports[num-1], true
}

// Open opens a new uverbs command file on the device, as open("/dev/infiniband/uverbsN").
func (d *Device) Open() (uverbs.File, error) {
	return d.open()
}

// OpenFile is Open with the concrete file, for a host that serves the file's descriptor
// to C code itself (package emuhost).
func (d *Device) OpenFile() (*File, error) { return d.open() }

func (d *Device) open() (*File, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("open %s: %w", d.name, ErrClosed)
	}
	f, err := newFile(d)
	if err != nil {
		return nil, err
	}
	d.files[f] = struct{}{}
	return f, nil
}

func (d *Device) events() hwEvents {
	return hwEvents{
		completion: func(cqn uint32) {
			d.mu.Lock()
			cq := d.cqs[cqn]
			d.mu.Unlock()
			if cq != nil && cq.channel != nil {
				cq.evMu.Lock()
				if !cq.dead {
					cq.compEvents.Add(1)
					cq.channel.pushComp(cq.userHandle)
				}
				cq.evMu.Unlock()
			}
		},
		cqError: func(cqn uint32) {
			d.mu.Lock()
			cq := d.cqs[cqn]
			d.mu.Unlock()
			if cq != nil {
				cq.evMu.Lock()
				if !cq.dead {
					cq.asyncEvents.Add(1)
					cq.file.asyncEvent(cq.userHandle, uverbs.EventCQErr)
				}
				cq.evMu.Unlock()
			}
		},
		qpEvent: func(qpn, event uint32) {
			d.mu.Lock()
			qp := d.qps[qpn]
			d.mu.Unlock()
			if qp != nil {
				qp.evMu.Lock()
				if !qp.dead {
					qp.events.Add(1)
					qp.file.asyncEvent(qp.userHandle, event)
				}
				qp.evMu.Unlock()
			}
		},
		portChange: func(port int, active bool) {
			ev := uint32(uverbs.EventPortErr)
			if active {
				ev = uverbs.EventPortActive
			}
			for _, f := range d.openFiles() {
				f.asyncEvent(uint64(port), ev)
			}
		},
		// ib_dispatch_event(IB_EVENT_DEVICE_FATAL) reaches every context's async file;
		// the element of a device event is the device, which user space does not name (0).
		fatal: func() {
			for _, f := range d.openFiles() {
				f.asyncEvent(0, uverbs.EventDeviceFatal)
			}
		},
	}
}

func (d *Device) openFiles() []*File {
	d.mu.Lock()
	defer d.mu.Unlock()
	files := make([]*File, 0, len(d.files))
	for f := range d.files {
		files = append(files, f)
	}
	return files
}

func (d *Device) forget(f *File) {
	d.mu.Lock()
	delete(d.files, f)
	d.mu.Unlock()
}

// Close closes every open file and releases the NIC.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	files := make([]*File, 0, len(d.files))
	for f := range d.files {
		files = append(files, f)
	}
	d.mu.Unlock()
	var errs []error
	for _, f := range files {
		errs = append(errs, f.Close())
	}
	errs = append(errs, d.hw.close())
	return errors.Join(errs...)
}

package nic

import (
	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// Health is whether the device still works (Device.Health).
type Health uint32

const (
	// Healthy: the device executes doorbells, writes CQEs and answers commands.
	Healthy Health = iota
	// Hung: the device stopped silently, as a ConnectX whose firmware or PCIe path wedged
	// without the driver noticing: no doorbell executes, no CQE or packet leaves it, no event
	// is raised, its ports stay up and commands are still answered (a driver learns of such a
	// hang only from its own command timeouts, which the model does not have).
	Hung
	// Dead: the device failed and said so (a firmware fatal error, mlx5's SYS_ERROR): nothing
	// executes, no CQE or packet leaves it, its ports are down, the driver raised
	// IBV_EVENT_DEVICE_FATAL, and commands fail with EIO.
	Dead
)

func (h Health) String() string {
	switch h {
	case Healthy:
		return "healthy"
	case Hung:
		return "hung"
	}
	return "dead"
}

// Health reports whether the device works, hung silently or died.
func (d *Device) Health() Health { return Health(d.health.Load()) }

// alive reports whether the device still executes anything.
func (d *Device) alive() bool { return d.health.Load() == uint32(Healthy) }

// Kill makes the device fail as a ConnectX does on a fatal error: it stops executing doorbells
// and writing CQEs, drops the packets it would send or receive, calls Config.OnFatal (the
// driver raises IBV_EVENT_DEVICE_FATAL), then takes its ports down (OnPortState: PORT_ERR).
// Later commands fail with ErrDead (EIO). A device dies once; killing a hung one reports the
// failure it had hidden.
func (d *Device) Kill() {
	if d.health.Swap(uint32(Dead)) == uint32(Dead) || d.closed.Load() {
		return
	}
	if d.onFatal != nil {
		d.onFatal()
	}
	for _, p := range d.ports {
		p.SetLinkUp(false)
	}
}

// Hang makes the device stop silently (Hung): no event, no port change. It has no effect on a
// dead device.
func (d *Device) Hang() { d.health.CompareAndSwap(uint32(Healthy), uint32(Hung)) }

// Dead fails command op on a dead device as mlx5_cmd_exec does once the device is in
// internal error (EIO, wrapping ErrDead); nil otherwise. Commands that destroy objects still
// succeed there, as do the moves of a QP to ERR or RESET (the driver fakes their completion
// so that cleanup works), so the kernel side asks only before the commands that create
// objects or make other changes.
func (d *Device) Dead(op string) error {
	if d.Health() == Dead {
		return newErr(op, ErrDead, unix.EIO, "%s: device in fatal error", d.name)
	}
	return nil
}

// txGate is the link the RC engines transmit through: a device that hung or died sends
// nothing, whatever its engines' timers still want to retransmit.
type txGate struct {
	roce.Link
	d *Device
}

func (g txGate) Send(p *roce.Packet) {
	if g.d.alive() {
		g.Link.Send(p)
	}
}

package fabric

import (
	"sync"
	"time"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// TapPoint says where a tapped packet was seen.
type TapPoint uint8

// Tap points.
const (
	TapSent      TapPoint = iota // accepted by the sender's port, before its TX fault hooks
	TapDelivered                 // about to be handed to the receiver
)

// TapFunc observes packets crossing the fabric. It runs on the sending or delivering
// goroutine and must neither keep nor modify p.
type TapFunc func(at time.Time, where TapPoint, p *roce.Packet)

// SetTap installs fn as the fabric's tap (nil removes it), for traces and captures.
func (f *Fabric) SetTap(fn TapFunc) {
	if fn == nil {
		f.tap.Store(nil)
		return
	}
	f.tap.Store(&fn)
}

func (f *Fabric) tapped(where TapPoint, p *roce.Packet) {
	if fn := f.tap.Load(); fn != nil {
		(*fn)(f.clk.Now(), where, p)
	}
}

// PcapTap returns a tap that writes every packet seen at one point to w as an Ethernet frame
// (addresses from roce.MACFor), serialising writers. The first write error is kept and
// returned by the second function; later packets are not written.
func PcapTap(w *roce.PcapWriter, where TapPoint) (TapFunc, func() error) {
	var mu sync.Mutex
	var werr error
	tap := func(at time.Time, pt TapPoint, p *roce.Packet) {
		if pt != where {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if werr == nil {
			werr = w.WritePacket(at, p)
		}
	}
	return tap, func() error { mu.Lock(); defer mu.Unlock(); return werr }
}

package fabric

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5/emu/roce"
)

// UDPLink is a roce.Link that carries real RoCEv2: each packet is marshalled with its ICRC and
// sent as one UDP datagram from this endpoint's address, port 4791, to the destination's
// port 4791; datagrams received on that port are unmarshalled, their ICRC checked, and handed
// to the receiver. The socket belongs to the network namespace of the thread that called
// ListenUDP (see internal/netnstest), so emulated hosts in different namespaces talk over
// whatever links the kernel routes through, and a link that goes down loses packets as a
// NIC's does.
//
// Datagrams carry DF, and the ICRC of received packets is checked against the IP header a
// Linux sender emits (identification 0 with DF; see roce.ICRC).
type UDPLink struct {
	conn *net.UDPConn
	addr netip.Addr
	port uint16
	ctr  counters
	recv atomic.Pointer[func(*roce.Packet)]

	icrcErrors atomic.Uint64
	lastErr    atomic.Pointer[error]
	closed     atomic.Bool
	done       chan struct{}
	bufs       sync.Pool
	netdev     *netdevState
}

var _ roce.Link = (*UDPLink)(nil)

// ListenUDP binds addr:4791 (UDP), starts the receive goroutine, and follows the link state
// of the interface holding addr (see LinkUp). Call it on the thread whose network namespace
// the link belongs to (netnstest.NS.Do).
func ListenUDP(addr netip.Addr) (*UDPLink, error) {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsUnspecified() || addr.IsMulticast() {
		return nil, fmt.Errorf("fabric: listen udp %v: %w", addr, ErrBadAddr)
	}
	network := "udp4"
	if addr.Is6() {
		network = "udp6"
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			// DF on every datagram: RoCE never fragments, and a DF datagram from an
			// unconnected socket gets IP identification 0, which the ICRC covers.
			if addr.Is4() {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
			} else {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), network, net.JoinHostPort(addr.String(), strconv.Itoa(roce.UDPPort)))
	if err != nil {
		return nil, fmt.Errorf("fabric: listen udp %v: %w", addr, err)
	}
	nd, err := watchNetdev(addr)
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("fabric: listen udp %v: %w", addr, err)
	}
	l := &UDPLink{conn: pc.(*net.UDPConn), addr: addr, port: roce.UDPPort, done: make(chan struct{}), netdev: nd}
	l.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	go l.readLoop()
	return l, nil
}

// LinkUp reports whether the interface holding the link's address is up with carrier.
func (l *UDPLink) LinkUp() bool { return l.netdev.up.Load() }

// Watch calls fn on every later change of LinkUp, from the link's notification goroutine, in
// order, until cancel is called: the emulated port raises its port events from it.
func (l *UDPLink) Watch(fn func(LinkEvent)) (cancel func()) { return l.netdev.watch(fn) }

// OnLinkState calls fn with the new state on every change of LinkUp (see Watch).
func (l *UDPLink) OnLinkState(fn func(up bool)) { l.Watch(func(e LinkEvent) { fn(e.Up) }) }

// Addr is the bound address.
func (l *UDPLink) Addr() netip.Addr { return l.addr }

// Stats returns the link's counters. Bad ICRCs and undecodable datagrams count as RX drops.
func (l *UDPLink) Stats() Stats { return l.ctr.snapshot() }

// ICRCErrors counts received datagrams whose ICRC did not match.
func (l *UDPLink) ICRCErrors() uint64 { return l.icrcErrors.Load() }

// SendError returns the error of the latest failed send (nil if none failed), for
// diagnostics: Send itself reports nothing, as a NIC's transmit path does not.
func (l *UDPLink) SendError() error {
	if p := l.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// SetReceiver installs fn as the function called, on the link's receive goroutine, for every
// valid packet that arrives; nil discards arrivals.
func (l *UDPLink) SetReceiver(fn func(*roce.Packet)) {
	if fn == nil {
		l.recv.Store(nil)
		return
	}
	l.recv.Store(&fn)
}

// Send marshals p and sends it to p.DstIP:4791. p.SrcIP and p.SrcPort are set to the
// socket's address and port, which is what the ICRC must cover. A failed send (no route,
// link down, message too long) is counted as a TX drop.
func (l *UDPLink) Send(p *roce.Packet) {
	if l.closed.Load() {
		l.ctr.txDropped.Add(1)
		return
	}
	p.SrcIP, p.SrcPort = l.addr, l.port
	bp := l.bufs.Get().(*[]byte)
	defer l.bufs.Put(bp)
	b, err := p.AppendWire((*bp)[:0])
	*bp = b[:0]
	if err != nil {
		l.ctr.txInvalid.Add(1)
	} else {
		_, err = l.conn.WriteToUDPAddrPort(b, netip.AddrPortFrom(p.DstIP.Unmap(), roce.UDPPort))
	}
	if err != nil {
		l.setSendError(fmt.Errorf("fabric: udp send %v to %v: %w", p.BTH.Opcode, p.DstIP, err))
		l.ctr.txDropped.Add(1)
		return
	}
	l.ctr.txPackets.Add(1)
	l.ctr.txBytes.Add(uint64(len(p.Payload)))
}

// setSendError keeps err for SendError; a separate function so that Send's own error
// variable stays on the stack.
func (l *UDPLink) setSendError(err error) { l.lastErr.Store(&err) }

func (l *UDPLink) readLoop() {
	defer close(l.done)
	buf := make([]byte, 1<<16)
	for {
		n, from, err := l.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if l.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			l.ctr.rxDropped.Add(1)
			continue
		}
		p := new(roce.Packet)
		if err := roce.Unmarshal(buf[:n], from.Addr().Unmap(), l.addr, from.Port(), p); err != nil {
			if errors.Is(err, roce.ErrICRC) {
				l.icrcErrors.Add(1)
			}
			l.ctr.rxDropped.Add(1)
			continue
		}
		if len(p.Payload) > 0 {
			p.Payload = append([]byte(nil), p.Payload...) // the receiver owns it; buf is reused
		}
		fn := l.recv.Load()
		if fn == nil {
			l.ctr.rxDropped.Add(1)
			continue
		}
		l.ctr.rxPackets.Add(1)
		l.ctr.rxBytes.Add(uint64(len(p.Payload)))
		(*fn)(p)
	}
}

// Close releases the socket and waits for the receive goroutine; the receiver is not called
// afterwards. It must not be called from the receiver.
func (l *UDPLink) Close() error {
	if l.closed.Swap(true) {
		<-l.done
		return nil
	}
	err := l.conn.Close()
	<-l.done
	l.netdev.close()
	if err != nil {
		return fmt.Errorf("fabric: close udp %v: %w", l.addr, err)
	}
	return nil
}

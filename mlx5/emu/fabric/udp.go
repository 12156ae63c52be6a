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
// The socket's buffers are enlarged (see tuneSocket) and the receive goroutine drains it in
// batches, so that a burst is lost only where the receiver truly cannot keep up, as a NIC's
// receive pipeline overflows; what the kernel drops is counted (SocketDrops, Stats).
//
// Datagrams carry DF, and the ICRC of received packets is checked against the IP header a
// Linux sender emits (identification 0 with DF; see roce.ICRC).
type UDPLink struct {
	conn *net.UDPConn
	raw  syscall.RawConn
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
	ownNetdev  bool          // the watch is the link's own (not a LazyUDPLink's)
	sockDrops  atomic.Uint64 // latest socket drop count read, kept for Stats after Close
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
	return listenUDP(addr, nil)
}

// listenUDP binds addr:4791 and follows nd, or a netdev watch of its own when nd is nil.
func listenUDP(addr netip.Addr, nd *netdevState) (*UDPLink, error) {
	network := "udp4"
	if addr.Is6() {
		network = "udp6"
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = tuneSocket(int(fd), addr.Is4()) }); err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), network, net.JoinHostPort(addr.String(), strconv.Itoa(roce.UDPPort)))
	if err != nil {
		return nil, fmt.Errorf("fabric: listen udp %v: %w", addr, err)
	}
	own := nd == nil
	if own {
		var err error
		if nd, err = watchNetdev(addr); err != nil {
			pc.Close()
			return nil, fmt.Errorf("fabric: listen udp %v: %w", addr, err)
		}
	}
	conn := pc.(*net.UDPConn)
	raw, err := conn.SyscallConn()
	if err != nil {
		pc.Close()
		if own {
			nd.close()
		}
		return nil, fmt.Errorf("fabric: listen udp %v: %w", addr, err)
	}
	l := &UDPLink{conn: conn, raw: raw, addr: addr, port: roce.UDPPort, done: make(chan struct{}), netdev: nd, ownNetdev: own}
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

// Stats returns the link's counters. Bad ICRCs, undecodable or truncated datagrams, and the
// datagrams the kernel dropped before the link could read them (SocketDrops) count as RX
// drops.
func (l *UDPLink) Stats() Stats {
	s := l.ctr.snapshot()
	s.RxDropped += l.SocketDrops()
	return s
}

// SocketDrops counts the datagrams addressed to the link that the kernel discarded on its
// socket, above all because the receive buffer was full when the link's receive goroutine
// fell behind: the emulated port's receive-overflow drops. After Close it keeps the last
// count read.
func (l *UDPLink) SocketDrops() uint64 {
	if !l.closed.Load() {
		l.readSocketDrops()
	}
	return l.sockDrops.Load()
}

// readSocketDrops refreshes sockDrops from the socket, if it is still open.
func (l *UDPLink) readSocketDrops() {
	var n uint32
	var serr error
	if err := l.raw.Control(func(fd uintptr) { n, serr = socketDrops(int(fd)) }); err != nil || serr != nil {
		return
	}
	for { // the kernel's count only grows; never step back past a concurrent reader's value
		old := l.sockDrops.Load()
		if uint64(n) <= old || l.sockDrops.CompareAndSwap(old, uint64(n)) {
			return
		}
	}
}

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

// Receive batch: datagrams per recvmmsg call, and the buffer for each, which holds any
// RoCEv2 packet of the largest IB MTU (4096 payload bytes plus headers and ICRC) with room
// to spare; a longer datagram is truncated and dropped.
const (
	rxBatch   = 64
	rxBufSize = 9216
)

func (l *UDPLink) readLoop() {
	defer close(l.done)
	batch := newMmsgBatch(rxBatch, rxBufSize)
	for {
		var n int
		var rerr error
		err := l.raw.Read(func(fd uintptr) bool {
			n, rerr = batch.recv(int(fd))
			return rerr != unix.EAGAIN // EAGAIN: wait in the poller until the socket is readable
		})
		if err != nil {
			if l.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			l.ctr.rxDropped.Add(1)
			continue
		}
		if rerr != nil {
			if rerr != unix.EINTR {
				l.ctr.rxDropped.Add(1)
			}
			continue
		}
		for i := range n {
			l.deliver(batch.msg(i))
		}
	}
}

// deliver decodes one received datagram and hands it to the receiver.
func (l *UDPLink) deliver(b []byte, from netip.AddrPort, truncated bool) {
	if truncated {
		l.ctr.rxDropped.Add(1)
		return
	}
	p := new(roce.Packet)
	if err := roce.Unmarshal(b, from.Addr().Unmap(), l.addr, from.Port(), p); err != nil {
		if errors.Is(err, roce.ErrICRC) {
			l.icrcErrors.Add(1)
		}
		l.ctr.rxDropped.Add(1)
		return
	}
	if len(p.Payload) > 0 {
		p.Payload = append([]byte(nil), p.Payload...) // the receiver owns it; the buffer is reused
	}
	fn := l.recv.Load()
	if fn == nil {
		l.ctr.rxDropped.Add(1)
		return
	}
	l.ctr.rxPackets.Add(1)
	l.ctr.rxBytes.Add(uint64(len(p.Payload)))
	(*fn)(p)
}

// Close releases the socket and waits for the receive goroutine; the receiver is not called
// afterwards. It must not be called from the receiver.
func (l *UDPLink) Close() error {
	if l.closed.Swap(true) {
		<-l.done
		return nil
	}
	l.readSocketDrops() // the last count, before the socket goes
	err := l.conn.Close()
	<-l.done
	if l.ownNetdev {
		l.netdev.close()
	}
	if err != nil {
		return fmt.Errorf("fabric: close udp %v: %w", l.addr, err)
	}
	return nil
}

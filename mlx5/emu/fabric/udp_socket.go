package fabric

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Socket buffer sizes of a UDPLink. The kernel's default receive buffer (net.core.rmem_default,
// about 208 KiB) holds only a few dozen MTU-sized datagrams, because each is charged its full
// skb truesize; a burst of one 128-deep queue of 8 KiB messages is 256 datagrams of 4 KiB,
// so the default overflows and go-back-N retransmits the same burst into the same overflow
// until the retry count runs out. A real ConnectX buffers far more in its receive pipeline
// before it drops, so the link asks for room for several thousand MTU-sized datagrams.
const (
	udpRcvBuf = 32 << 20
	udpSndBuf = 8 << 20
)

// tuneSocket sets the socket options of a UDPLink's socket: DF on every datagram (RoCE never
// fragments, and a DF datagram from an unconnected socket gets IP identification 0, which the
// ICRC covers), and large send and receive buffers. The buffers are asked for with the FORCE
// options first, which bypass net.core.[rw]mem_max for a process with CAP_NET_ADMIN; without
// it the plain options give as much as the sysctl caps allow. Only a failure to set DF is an
// error: smaller buffers only mean earlier drops, which Stats counts.
func tuneSocket(fd int, is4 bool) error {
	var err error
	if is4 {
		err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
	} else {
		err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
	}
	if err != nil {
		return err
	}
	setBuf(fd, unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, udpRcvBuf)
	setBuf(fd, unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, udpSndBuf)
	return nil
}

// setBuf asks for size bytes with the force option, falling back to the capped one.
func setBuf(fd, force, plain, size int) {
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, size) == nil {
		return
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, plain, size) // capped at the sysctl maximum, never refused
}

// SocketBuffers returns the receive and send buffer sizes the kernel gave the link's socket
// (as getsockopt reports them: twice what was asked for, to cover bookkeeping), so that a
// caller can tell how large a burst the link absorbs before it drops.
func (l *UDPLink) SocketBuffers() (rcv, snd int, err error) {
	var rerr, serr error
	cerr := l.raw.Control(func(fd uintptr) {
		rcv, rerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		snd, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
	})
	if err = errors.Join(cerr, rerr, serr); err != nil {
		return 0, 0, fmt.Errorf("fabric: udp %v socket buffers: %w", l.addr, err)
	}
	return rcv, snd, nil
}

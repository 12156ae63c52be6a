package fabric

import (
	"net/netip"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsgBatch receives up to len(hdrs) datagrams with one recvmmsg(2) call, so that a burst
// the receive goroutine falls behind on is drained in a few system calls and wakeups instead
// of one of each per datagram. The headers, I/O vectors and source-address buffers are set up
// once and reused; x/sys/unix has the struct mmsghdr layout (<linux/socket.h>) but no
// wrapper for the call.
type mmsgBatch struct {
	hdrs  []unix.Mmsghdr        // struct mmsghdr, include/linux/socket.h
	iovs  []unix.Iovec          // struct iovec, include/uapi/linux/uio.h
	names []unix.RawSockaddrAny // struct sockaddr_storage-sized source addresses
	bufs  [][]byte              // one datagram buffer per header
}

func newMmsgBatch(n, size int) *mmsgBatch {
	b := &mmsgBatch{hdrs: make([]unix.Mmsghdr, n), iovs: make([]unix.Iovec, n),
		names: make([]unix.RawSockaddrAny, n), bufs: make([][]byte, n)}
	slab := make([]byte, n*size)
	for i := range n {
		b.bufs[i] = slab[i*size : (i+1)*size : (i+1)*size]
		b.iovs[i].Base = &b.bufs[i][0]
		b.iovs[i].SetLen(size)
		h := &b.hdrs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Iov = &b.iovs[i]
		h.SetIovlen(1)
	}
	return b
}

// recv reads the datagrams already queued on fd without blocking; unix.EAGAIN means none was.
func (b *mmsgBatch) recv(fd int) (int, error) {
	for i := range b.hdrs {
		b.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrAny
		b.hdrs[i].Hdr.Flags = 0
		b.hdrs[i].Len = 0
	}
	r, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&b.hdrs[0])),
		uintptr(len(b.hdrs)), unix.MSG_DONTWAIT, 0, 0)
	runtime.KeepAlive(b)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// msg returns datagram i of the latest recv: its bytes (valid until the next recv), its
// source, and whether it was longer than the buffer (MSG_TRUNC) and so is incomplete.
func (b *mmsgBatch) msg(i int) (data []byte, from netip.AddrPort, truncated bool) {
	h := &b.hdrs[i]
	n := int(h.Len)
	truncated = h.Hdr.Flags&unix.MSG_TRUNC != 0 || n > len(b.bufs[i])
	n = min(n, len(b.bufs[i]))
	switch sa := &b.names[i]; sa.Addr.Family {
	case unix.AF_INET:
		in := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		from = netip.AddrPortFrom(netip.AddrFrom4(in.Addr), ntohs(in.Port))
	case unix.AF_INET6:
		in := (*unix.RawSockaddrInet6)(unsafe.Pointer(sa))
		from = netip.AddrPortFrom(netip.AddrFrom16(in.Addr), ntohs(in.Port))
	}
	return b.bufs[i][:n], from, truncated
}

// ntohs converts a port as the kernel stores it in a sockaddr (network order) to a number.
func ntohs(p uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&p))
	return uint16(b[0])<<8 | uint16(b[1])
}

// socketDrops returns the socket's drop count (sk_drops: datagrams the kernel discarded for a
// full receive buffer, a bad checksum or a filter) from getsockopt(SO_MEMINFO), which x/sys
// wraps only for fixed-size scalars.
func socketDrops(fd int) (uint32, error) {
	var mi [unix.SK_MEMINFO_VARS]uint32 // u32 sk_meminfo[SK_MEMINFO_VARS], include/uapi/linux/sock_diag.h
	l := uint32(unsafe.Sizeof(mi))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&mi)), uintptr(unsafe.Pointer(&l)), 0)
	if errno != 0 {
		return 0, errno
	}
	return mi[unix.SK_MEMINFO_DROPS], nil
}

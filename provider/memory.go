package provider

import (
	"fmt"
	"sync/atomic"

	"github.com/shift-rdma/shift/provider/verbs"
	"golang.org/x/sys/unix"
)

// Buffer is memory outside the Go heap (an anonymous, page-aligned mmap), for MRs and rings.
// The garbage collector neither moves nor frees it, so the NIC may DMA into it for as long as
// it stays registered; Free unmaps it and must come after every MR over it is deregistered.
//
// Rule for caller-provided memory (RegMR with a slice from elsewhere): the memory must not be
// Go-heap memory unless the caller pins it for the MR's lifetime (runtime.Pinner) and keeps a
// reference; memory from mmap, C, or a Buffer is always fine.
type Buffer struct {
	b []byte
}

// NewBuffer maps size bytes (rounded up to the page size) of zeroed, page-aligned memory.
func NewBuffer(size int) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("provider: new buffer: %w: size %d", verbs.ErrInvalidArgument, size)
	}
	ps := unix.Getpagesize()
	n := alignUp(size, ps)
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("provider: new buffer: mmap %d bytes: %w", n, err)
	}
	liveBuffers.Add(1)
	return &Buffer{b: b[:size:n]}, nil
}

// newRingBuffer is NewBuffer for memory the device reads or writes on its own (rings,
// doorbell records), marked MADV_DONTFORK as libibverbs marks provider buffers: a child of
// fork never gets a copy-on-write copy of memory the NIC is still writing to the parent's
// pages, and cannot post on the parent's rings.
func newRingBuffer(size int) (*Buffer, error) {
	b, err := NewBuffer(size)
	if err != nil {
		return nil, err
	}
	if err := unix.Madvise(b.b[:cap(b.b)], unix.MADV_DONTFORK); err != nil {
		b.Free()
		return nil, fmt.Errorf("provider: new ring buffer: madvise: %w", err)
	}
	return b, nil
}

// liveBuffers counts mapped Buffers, for the leak check of the tests.
var liveBuffers atomic.Int64

// Bytes returns the buffer's memory.
func (m *Buffer) Bytes() []byte { return m.b }

// Addr is the virtual address of the first byte, as SGEs and remote peers use it.
func (m *Buffer) Addr() uint64 { return sliceAddr(m.b) }

// Len is the usable size.
func (m *Buffer) Len() int { return len(m.b) }

// Free unmaps the memory. Using the buffer afterwards faults.
func (m *Buffer) Free() error {
	if m.b == nil {
		return nil
	}
	b := m.b[:cap(m.b)]
	m.b = nil
	liveBuffers.Add(-1)
	if err := unix.Munmap(b); err != nil {
		return fmt.Errorf("provider: free buffer: %w", err)
	}
	return nil
}

package emu

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
)

// Mmap maps a UAR page of the context at the offset libmlx5 computes (mlx5_ib_mmap: command
// in bits 8..15 of the page offset, page index below). The emulator and the application
// share one address space, so the mapping is the NIC's own page: doorbells written into it
// are what the NIC's watcher sees, as with a real BAR mapping.
func (f *File) Mmap(offset int64, length int) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.needContext("mmap"); err != nil {
		return nil, err
	}
	cmd, idx, err := mlx5.DecodeMmapOffset(offset, pageSize)
	if err != nil {
		return nil, fmt.Errorf("mmap offset %#x: %w", offset, unix.EINVAL)
	}
	if cmd >= mlx5.MmapOffsetStart {
		// An entry: a dynamic UAR page (mlx5_ib_mmap_offset).
		if idx >= len(f.ctx.dyn) || f.ctx.dyn[idx].freed || length != pageSize {
			return nil, fmt.Errorf("mmap offset %#x: no UAR entry %d of length %d: %w", offset, idx, length, unix.EINVAL)
		}
		m := f.ctx.dyn[idx].page.Mem()
		f.mapped = append(f.mapped, m)
		return m, nil
	}
	switch cmd {
	case mlx5.MmapRegularPage, mlx5.MmapWCPage, mlx5.MmapNCPage:
	default:
		return nil, fmt.Errorf("mmap offset %#x: command %d not emulated: %w", offset, cmd, unix.EINVAL)
	}
	if length != pageSize {
		// uar_mmap: one page at a time.
		return nil, fmt.Errorf("mmap offset %#x: length %d: %w", offset, length, unix.EINVAL)
	}
	if idx < 0 || idx >= len(f.ctx.uars) {
		return nil, fmt.Errorf("mmap offset %#x: UAR page %d of %d: %w", offset, idx, len(f.ctx.uars), unix.EINVAL)
	}
	m := f.ctx.uars[idx].Mem()
	f.mapped = append(f.mapped, m)
	return m, nil
}

// Munmap releases a mapping returned by Mmap. The page itself stays with the NIC until the
// context is closed, as the kernel keeps the UAR until the last reference goes.
func (f *File) Munmap(b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, m := range f.mapped {
		if len(m) > 0 && len(b) > 0 && &m[0] == &b[0] {
			f.mapped = append(f.mapped[:i], f.mapped[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("munmap: not a mapping of this file: %w", unix.EINVAL)
}

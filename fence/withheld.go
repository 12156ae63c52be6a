package fence

import "github.com/shift-rdma/shift/provider"

// Withheld appends to dst the application WQEs the fence wrote on the new QP that are still
// unrung, oldest first, with their ring positions and wr_ids, and returns the extended slice.
// After a failure these are exactly the WRs the caller must carry elsewhere (for example with
// provider.QP.CopySendWQE) in this order; the notification is never among them. A done or
// idle fence has none. It does not allocate when dst has room.
func (f *Fence) Withheld(dst []provider.SendWQE) []provider.SendWQE {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.State(); s == Idle || s == Done {
		return dst
	}
	n := len(dst)
	dst = f.new.OutstandingSends(dst)
	k := n
	for _, w := range dst[n:] {
		if !w.Rung && int32(w.Pos-f.held) >= 0 {
			dst[k] = w
			k++
		}
	}
	return dst[:k]
}

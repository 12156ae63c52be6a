package provider

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// noUserIndex is the uidx a QP is created with on a CQE version 0 context (libmlx5 sends
// 0xffffff; mlx5_ib's get_qp_user_index refuses anything else there).
const noUserIndex = 0xffffff

// userIndexes hands out the user indexes of CQE version 1 (libmlx5's mlx5_store_uidx): the
// lowest free numbers, reused once their QP is destroyed, below the 24-bit field's all-ones
// value. The context's mutex guards it.
type userIndexes struct {
	free []uint32
	next uint32
}

func (u *userIndexes) get() (uint32, error) {
	if n := len(u.free); n > 0 {
		i := u.free[n-1]
		u.free = u.free[:n-1]
		return i, nil
	}
	if u.next >= noUserIndex {
		return 0, fmt.Errorf("all %d user indexes in use: %w", noUserIndex, unix.ENOMEM)
	}
	u.next++
	return u.next - 1, nil
}

func (u *userIndexes) put(i uint32) { u.free = append(u.free, i) }

// newUserIndex is the uidx of a new QP: a fresh index on a CQE version 1 context.
func (c *Context) newUserIndex() (uint32, error) {
	if c.resp.CQEVersion == 0 {
		return noUserIndex, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.uidx.get()
}

func (c *Context) freeUserIndex(i uint32) {
	if c.resp.CQEVersion == 0 {
		return
	}
	c.mu.Lock()
	c.uidx.put(i)
	c.mu.Unlock()
}

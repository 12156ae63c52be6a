package emutest

import (
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5/emu"
)

// deferred holds, per device of a cluster made by NewCluster, the memory of closed contexts,
// unmapped only after the cluster (and so every NIC watcher and RC engine) has stopped.
var deferred struct {
	sync.Mutex
	byDev map[*emu.Device]*[][]byte
}

// NewCluster builds an emulated cluster closed when the test ends. Memory of contexts opened on
// its devices is unmapped after the cluster is closed: the device model may still deliver a
// late transport event for a QP destroyed a moment before (see the package notes in the
// H5 report), and unmapping under it would crash the test process.
func NewCluster(t testing.TB, cfg emu.ClusterConfig) *emu.Cluster {
	t.Helper()
	c, err := emu.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var lists []*[][]byte
	deferred.Lock()
	if deferred.byDev == nil {
		deferred.byDev = map[*emu.Device]*[][]byte{}
	}
	for _, h := range c.Hosts {
		for _, d := range h.Devices {
			l := new([][]byte)
			deferred.byDev[d] = l
			lists = append(lists, l)
		}
	}
	deferred.Unlock()
	devs := c.Hosts
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
		deferred.Lock()
		for _, h := range devs {
			for _, d := range h.Devices {
				delete(deferred.byDev, d)
			}
		}
		deferred.Unlock()
		for _, l := range lists {
			for _, b := range *l {
				_ = unix.Munmap(b)
			}
		}
	})
	return c
}

// release unmaps mems now, or after the device's cluster is closed when NewCluster made it.
func release(d *emu.Device, mems [][]byte) bool {
	deferred.Lock()
	defer deferred.Unlock()
	l, ok := deferred.byDev[d]
	if ok {
		*l = append(*l, mems...)
	}
	return ok
}

// Adopt closes d when the test ends and, like NewCluster, keeps the memory of contexts opened
// on it mapped until then. after runs once d is closed (to close its links, for instance).
func Adopt(t testing.TB, d *emu.Device, after func()) {
	t.Helper()
	l := new([][]byte)
	deferred.Lock()
	if deferred.byDev == nil {
		deferred.byDev = map[*emu.Device]*[][]byte{}
	}
	deferred.byDev[d] = l
	deferred.Unlock()
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close %s: %v", d.Name(), err)
		}
		if after != nil {
			after()
		}
		deferred.Lock()
		delete(deferred.byDev, d)
		deferred.Unlock()
		for _, b := range *l {
			_ = unix.Munmap(b)
		}
	})
}

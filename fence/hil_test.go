package fence_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/shift-rdma/shift/internal/hiltest"
	"github.com/shift-rdma/shift/mlx5/emu"
)

// TestHIL runs the withheld-doorbell body on four real mlx5 ports (SHIFT_HIL_DEVICES: host
// A's default and backup, host B's default and backup): WRITEs posted behind a pending fence
// reach neither the wire nor the receiver's memory until the fence WR's completion is handed
// in, then all execute, in order, with their data.
func TestHIL(t *testing.T) {
	r := hiltest.Need(t, 4)
	b := newBedOn(t, nil, func(h, p int) (string, *emu.Device) { return r.Devices[2*h+p], nil }, r.GIDIndex)
	t.Run("WithheldDoNotExecuteUntilReleased", func(t *testing.T) { withheldBody(t, b) })
}

// TestHILPlumbing runs the hardware body on emulated devices reached by name through
// SHIFT_HIL_DEVICES, without the emulated NIC's counters.
func TestHILPlumbing(t *testing.T) {
	if os.Getenv("SHIFT_HIL_DEVICES") != "" {
		t.Skip("real devices configured; TestHIL covers them")
	}
	prefix := fmt.Sprintf("fencehil%d_%d_", os.Getpid(), clusterSeq.Add(1))
	c, err := emu.NewCluster(emu.ClusterConfig{Hosts: 2, NICs: 2, Register: true, Prefix: prefix, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	names := []string{prefix + "0", prefix + "1", prefix + "2", prefix + "3"}
	hiltest.Emulate(t, names, -1, func(dev string, up bool) error { return fmt.Errorf("fence bodies set no links (%s)", dev) })
	TestHIL(t)
}

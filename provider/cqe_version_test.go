package provider_test

import (
	"testing"

	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// TestCQEVersion: the provider asks for CQE version 1 as libmlx5 does and gives each QP the
// lowest free user index; on a device whose capability is version 0 it gets version 0,
// creates QPs with the "no user index" value, and the data path works the same.
func TestCQEVersion(t *testing.T) {
	for _, c := range []struct {
		name    string
		v0      bool
		version uint8
	}{{"v1", false, 1}, {"v0-device", true, 0}} {
		t.Run(c.name, func(t *testing.T) {
			tb := newTestbedCfg(t, func(cfg *emu.ClusterConfig) {
				caps := emu.DefaultCaps
				caps.CQEVersion0Only = c.v0
				cfg.Caps = &caps
			})
			ctx, err := provider.Open(tb.names[0])
			if err != nil {
				t.Fatal(err)
			}
			defer ctx.Close()
			if v := provider.CQEVersion(ctx); v != c.version {
				t.Fatalf("CQE version %d, want %d", v, c.version)
			}
			pd, err := ctx.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			defer pd.Dealloc()
			cq, err := ctx.CreateCQ(verbs.CQInitAttr{CQE: 16})
			if err != nil {
				t.Fatal(err)
			}
			defer cq.Destroy()
			create := func() *provider.QP {
				q, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
				if err != nil {
					t.Fatal(err)
				}
				return q.(*provider.QP)
			}
			want := func(i uint32) uint32 {
				if c.version == 0 {
					return provider.NoUserIndex
				}
				return i
			}
			a, b := create(), create()
			if provider.UserIndex(a) != want(0) || provider.UserIndex(b) != want(1) {
				t.Errorf("user indexes %#x, %#x; want %#x, %#x", provider.UserIndex(a), provider.UserIndex(b), want(0), want(1))
			}
			if err := a.Destroy(); err != nil {
				t.Fatal(err)
			}
			a = create() // takes the freed index
			if provider.UserIndex(a) != want(0) {
				t.Errorf("user index after reuse %#x, want %#x", provider.UserIndex(a), want(0))
			}
			for _, q := range []*provider.QP{a, b} {
				if err := q.Destroy(); err != nil {
					t.Fatal(err)
				}
			}
			t.Run("EveryOpcode", func(t *testing.T) { everyOpcodeBody(t, tb) })
		})
	}
}

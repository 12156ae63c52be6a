package provider_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// TestOlderKernels runs end-to-end bodies on emulated kernels that lack the ioctl forms of
// the commands the provider issues, and checks that the provider took the write() forms, as
// libibverbs does: every command after ENOTTY, only the missing ones after EPROTONOSUPPORT.
func TestOlderKernels(t *testing.T) {
	for _, c := range []struct {
		kernel emu.KernelABI
		want   []string
	}{
		{emu.KernelCurrent, nil},
		{emu.KernelWriteCreate, []string{"get_context", "query_port", "create_cq", "destroy_cq", "create_qp", "destroy_qp"}},
		{emu.KernelNoIoctl, []string{"get_context", "query_port", "create_cq", "destroy_cq", "create_qp", "destroy_qp", "dealloc_pd", "dereg_mr"}},
	} {
		t.Run(c.kernel.String(), func(t *testing.T) {
			tb := newTestbedKernel(t, c.kernel)
			ctx, err := provider.Open(tb.names[0])
			if err != nil {
				t.Fatal(err)
			}
			defer ctx.Close()
			if _, err := ctx.QueryPort(1); err != nil {
				t.Fatal(err)
			}
			pd, err := ctx.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			cq, err := ctx.CreateCQ(verbs.CQInitAttr{CQE: 16})
			if err != nil {
				t.Fatal(err)
			}
			qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				t.Fatal(err)
			}
			buf, err := provider.NewBuffer(4096)
			if err != nil {
				t.Fatal(err)
			}
			defer buf.Free()
			mr, err := pd.RegMR(buf.Bytes(), verbs.AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			for _, step := range []struct {
				name string
				err  error
			}{{"dereg mr", mr.Dereg()}, {"destroy qp", qp.Destroy()}, {"destroy cq", cq.Destroy()}, {"dealloc pd", pd.Dealloc()}} {
				if step.err != nil {
					t.Fatalf("%s: %v", step.name, step.err)
				}
			}
			if d := cmp.Diff(c.want, provider.WriteOnlyCommands(ctx)); d != "" {
				t.Errorf("commands sent as write() (-want +got):\n%s", d)
			}
			if c.kernel == emu.KernelCurrent {
				return
			}
			// The same bodies as on the current kernel, data path and events included.
			t.Run("EveryOpcode", func(t *testing.T) { everyOpcodeBody(t, tb) })
			t.Run("CompletionEvent", func(t *testing.T) { e2eCompletionEvent(t, tb) })
			t.Run("DevicesQueriesAndGIDs", func(t *testing.T) { e2eDevicesQueriesAndGIDs(t, tb) })
			t.Run("ResetAndReconnect", func(t *testing.T) { e2eResetAndReconnect(t, tb) })
		})
	}
}

package emu_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/emutest"
	"github.com/shift-rdma/shift/uverbs"
)

// TestInvokeWrite: write commands carried by UVERBS_METHOD_INVOKE_WRITE (libibverbs' path on
// kernels that have it) answer as through write(): a legacy and an extended QUERY_DEVICE give
// the write path's responses, ALLOC_PD makes a PD the write path can free, and the probe
// libibverbs' has_ioctl_write sends (a QUERY_DEVICE without input) fails with ENOSPC, not
// EPROTONOSUPPORT, so that libibverbs takes the ioctl path.
func TestInvokeWrite(t *testing.T) {
	c := newCluster(t, emu.ClusterConfig{Hosts: 1, NICs: 1})
	x := emutest.Open(t, c.Hosts[0].Devices[0])

	err := uverbs.InvokeWrite(x.File, uverbs.DriverIDMLX5, uverbs.CmdQueryDevice, nil, nil, nil, nil)
	wantErrno(t, "has_ioctl_write's probe", err, unix.ENOSPC)

	legacy, err := uverbs.QueryDeviceLegacy(x.File)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, binary.Size(legacy))
	if err := uverbs.InvokeWrite(x.File, uverbs.DriverIDMLX5, uverbs.CmdQueryDevice, make([]byte, 8), nil, out, nil); err != nil {
		t.Fatal(err)
	}
	var got uverbs.QueryDeviceResp
	if err := binary.Read(bytes.NewReader(out), binary.NativeEndian, &got); err != nil {
		t.Fatal(err)
	}
	if got != legacy {
		t.Errorf("legacy QUERY_DEVICE through INVOKE_WRITE:\n%+v\nwrite() says\n%+v", got, legacy)
	}

	ex, err := uverbs.QueryDevice(x.File)
	if err != nil {
		t.Fatal(err)
	}
	exOut := make([]byte, binary.Size(ex))
	if err := uverbs.InvokeWrite(x.File, uverbs.DriverIDMLX5, uverbs.CmdFlagExtended|uverbs.ExCmdQueryDevice, make([]byte, 8), nil, exOut, nil); err != nil {
		t.Fatal(err)
	}
	var gotEx uverbs.ExQueryDeviceResp
	if err := binary.Read(bytes.NewReader(exOut), binary.NativeEndian, &gotEx); err != nil {
		t.Fatal(err)
	}
	if gotEx != ex {
		t.Errorf("extended QUERY_DEVICE through INVOKE_WRITE:\n%+v\nwrite() says\n%+v", gotEx, ex)
	}

	pdOut, pdn := make([]byte, 4), make([]byte, 4)
	if err := uverbs.InvokeWrite(x.File, uverbs.DriverIDMLX5, uverbs.CmdAllocPD, make([]byte, 8), nil, pdOut, pdn); err != nil {
		t.Fatal(err)
	}
	if err := uverbs.DeallocPDWrite(x.File, binary.NativeEndian.Uint32(pdOut)); err != nil {
		t.Errorf("the PD INVOKE_WRITE made cannot be freed: %v", err)
	}
}

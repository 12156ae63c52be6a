package emu

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/uverbs"
)

// KernelABI selects which uverbs commands the emulated kernel offers, so that the code paths
// a library takes on older kernels run here too. libibverbs (cmd_fallback.c,
// _execute_ioctl_fallback) reads ENOTTY from RDMA_VERBS_IOCTL as "no ioctl interface at all"
// and EPROTONOSUPPORT as "this method is missing", and then sends the legacy write command.
type KernelABI int

const (
	// KernelCurrent offers every method the emulator implements, as Linux 6.1 does.
	KernelCurrent KernelABI = iota
	// KernelWriteCreate has the ioctl interface but not the methods that create and destroy
	// contexts, CQs and QPs, allocate the async event fd, or query ports and GIDs: those answer
	// EPROTONOSUPPORT, as on kernels whose ioctl tree predates them, and the write commands
	// serve them (the async fd then comes from the write GET_CONTEXT response). Like those
	// kernels it has no dynamic UARs: MLX5_LIB_CAP_DYN_UAR is ignored and the UAR object is
	// missing.
	KernelWriteCreate
	// KernelNoIoctl has no RDMA_VERBS_IOCTL at all: every ioctl answers ENOTTY (and, like
	// KernelWriteCreate, no dynamic UARs).
	KernelNoIoctl
)

func (k KernelABI) String() string {
	switch k {
	case KernelCurrent:
		return "current"
	case KernelWriteCreate:
		return "write-create"
	case KernelNoIoctl:
		return "no-ioctl"
	}
	return fmt.Sprintf("KernelABI(%d)", int(k))
}

// ParseKernelABI is the inverse of KernelABI.String ("" is KernelCurrent).
func ParseKernelABI(s string) (KernelABI, error) {
	for _, k := range []KernelABI{KernelCurrent, KernelWriteCreate, KernelNoIoctl} {
		if s == k.String() {
			return k, nil
		}
	}
	if s == "" {
		return KernelCurrent, nil
	}
	return 0, fmt.Errorf("emu: kernel ABI %q: want current, write-create or no-ioctl", s)
}

// writeOnlyMethods are the ioctl methods KernelWriteCreate lacks.
var writeOnlyMethods = map[[2]uint16]bool{
	{uverbs.ObjectDevice, uverbs.MethodGetContext}:          true,
	{uverbs.ObjectDevice, uverbs.MethodQueryPort}:           true,
	{uverbs.ObjectDevice, uverbs.MethodQueryGIDTable}:       true,
	{uverbs.ObjectDevice, uverbs.MethodQueryGIDEntry}:       true,
	{uverbs.ObjectAsyncEvent, uverbs.MethodAsyncEventAlloc}: true,
	{uverbs.ObjectCQ, uverbs.MethodCQCreate}:                true,
	{uverbs.ObjectCQ, uverbs.MethodCQDestroy}:               true,
	{uverbs.ObjectQP, uverbs.MethodQPCreate}:                true,
	{uverbs.ObjectQP, uverbs.MethodQPDestroy}:               true,
	{mlx5.ObjectUAR, mlx5.MethodUARObjAlloc}:                true,
	{mlx5.ObjectUAR, mlx5.MethodUARObjDestroy}:              true,
}

// ioctlOffered is nil when the device's kernel ABI offers the method, else the errno the
// older kernel answers.
func (k KernelABI) ioctlOffered(object, method uint16) error {
	switch k {
	case KernelNoIoctl:
		return unix.ENOTTY
	case KernelWriteCreate:
		if writeOnlyMethods[[2]uint16{object, method}] {
			return unix.EPROTONOSUPPORT
		}
	}
	return nil
}

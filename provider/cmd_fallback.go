package provider

import (
	"errors"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/uverbs"
)

// Kernels differ in which commands they offer over RDMA_VERBS_IOCTL; every one the provider
// needs also has a legacy write() command. libibverbs' rule (cmd_fallback.c,
// _execute_ioctl_fallback) is followed: ENOTTY means the kernel has no ioctl interface, so
// every command goes to write() from then on; EPROTONOSUPPORT means this method is missing,
// so this command does. Any other error is the command's answer and is returned as is.

// ioctlCmd names a command that has both forms.
type ioctlCmd uint

const (
	cmdGetContext ioctlCmd = iota
	cmdQueryPort
	cmdCreateCQ
	cmdDestroyCQ
	cmdCreateQP
	cmdDestroyQP
	cmdDeallocPD
	cmdDeregMR
	numIoctlCmds
)

// cmdPaths is the per-context record of the commands the kernel answered as missing.
type cmdPaths struct {
	unsupported atomic.Uint32 // bit per ioctlCmd
}

// useWrite reports whether cmd goes straight to its write() form.
func (p *cmdPaths) useWrite(cmd ioctlCmd) bool { return p.unsupported.Load()&(1<<cmd) != 0 }

// ioctlFailed records what the ioctl form of cmd answered and reports whether the caller
// should retry with the write() form.
func (p *cmdPaths) ioctlFailed(cmd ioctlCmd, err error) bool {
	switch {
	case errors.Is(err, unix.ENOTTY):
		p.unsupported.Store(1<<numIoctlCmds - 1)
		return true
	case errors.Is(err, unix.EPROTONOSUPPORT):
		for {
			old := p.unsupported.Load()
			if p.unsupported.CompareAndSwap(old, old|1<<cmd) {
				return true
			}
		}
	}
	return false
}

// viaIoctl runs cmd's ioctl form unless the kernel lacks it, and its write() form otherwise.
func viaIoctl[T any](p *cmdPaths, cmd ioctlCmd, ioctl, write func() (T, error)) (T, error) {
	if !p.useWrite(cmd) {
		v, err := ioctl()
		if err == nil || !p.ioctlFailed(cmd, err) {
			return v, err
		}
	}
	return write()
}

// errOnly adapts a command that returns only an error to viaIoctl.
func errOnly(f func() error) func() (struct{}, error) {
	return func() (struct{}, error) { return struct{}{}, f() }
}

func (c *Context) cmdCreateCQ(r uverbs.CreateCQRequest, in, out []byte) (uverbs.CQ, error) {
	return viaIoctl(&c.cmds, cmdCreateCQ,
		func() (uverbs.CQ, error) { return uverbs.CreateCQ(c.f, uverbs.DriverIDMLX5, r, in, out) },
		func() (uverbs.CQ, error) { return uverbs.CreateCQWrite(c.f, r, in, out) })
}

func (c *Context) cmdDestroyCQ(h uint32) error {
	_, err := viaIoctl(&c.cmds, cmdDestroyCQ,
		func() (uverbs.DestroyCQResp, error) { return uverbs.DestroyCQ(c.f, uverbs.DriverIDMLX5, h) },
		func() (uverbs.DestroyCQResp, error) { return uverbs.DestroyCQWrite(c.f, h) })
	return err
}

func (c *Context) cmdCreateQP(r uverbs.CreateQPRequest, in, out []byte) (uverbs.QP, error) {
	return viaIoctl(&c.cmds, cmdCreateQP,
		func() (uverbs.QP, error) { return uverbs.CreateQP(c.f, uverbs.DriverIDMLX5, r, in, out) },
		func() (uverbs.QP, error) { return uverbs.CreateQPWrite(c.f, r, in, out) })
}

func (c *Context) cmdDestroyQP(h uint32) error {
	_, err := viaIoctl(&c.cmds, cmdDestroyQP,
		func() (uint32, error) { return uverbs.DestroyQP(c.f, uverbs.DriverIDMLX5, h) },
		func() (uint32, error) { return uverbs.DestroyQPWrite(c.f, h) })
	return err
}

func (c *Context) cmdDeallocPD(h uint32) error {
	_, err := viaIoctl(&c.cmds, cmdDeallocPD,
		errOnly(func() error { return uverbs.DeallocPD(c.f, uverbs.DriverIDMLX5, h) }),
		errOnly(func() error { return uverbs.DeallocPDWrite(c.f, h) }))
	return err
}

func (c *Context) cmdDeregMR(h uint32) error {
	_, err := viaIoctl(&c.cmds, cmdDeregMR,
		errOnly(func() error { return uverbs.DeregMR(c.f, uverbs.DriverIDMLX5, h) }),
		errOnly(func() error { return uverbs.DeregMRWrite(c.f, h) }))
	return err
}

package main

import (
	"os"
	"sync"

	"github.com/shift-rdma/shift/mlx5/emu/emuhost"
	"github.com/shift-rdma/shift/uverbs"
)

// The emulated devices this process hosts (package emuhost): each NIC starts on the device's
// first open and binds its address when the first QP is created on it.
var emulated struct {
	once sync.Once
	err  error
}

// registerEmulated makes every emulated device of the sysfs tree openable by name through
// package uverbs (provider.Open and failover's backups find them there), once per process.
func registerEmulated() error {
	emulated.once.Do(func() {
		o, err := emuhost.OptionsFromEnv(os.Getenv)
		if err != nil {
			emulated.err = err
			return
		}
		h, err := emuhost.Load(uverbs.DefaultSysfs(), o)
		if err != nil {
			emulated.err = err
			return
		}
		for _, d := range h.Devices() {
			open := func() (uverbs.File, error) {
				f, err := d.Open()
				if err != nil {
					return nil, err
				}
				return f, nil
			}
			if _, err := uverbs.Register(d.Info, open); err != nil {
				emulated.err = err
				return
			}
		}
	})
	return emulated.err
}

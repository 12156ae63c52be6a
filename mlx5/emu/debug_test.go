package emu

import "os"

func init() {
	if os.Getenv("EMU_DEBUG") != "" {
		debugErr = func(err error) { println("emu:", err.Error()) }
	}
}

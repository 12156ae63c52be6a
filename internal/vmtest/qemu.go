package vmtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// chooseAccel picks KVM only when the host has real hardware virtualisation (the kvm_intel
// or kvm_amd module) and /dev/kvm is writable. Some sandboxes expose a /dev/kvm backed by
// kvm_pvm, which cannot run a stock kernel, so /dev/kvm alone is not enough. SHIFT_VM_ACCEL
// forces a choice.
func chooseAccel() (string, error) {
	switch a := os.Getenv(EnvAccel); a {
	case "", "auto":
	case "tcg", "kvm":
		return a, nil
	default:
		return "", fmt.Errorf("vmtest: %s=%q: want tcg, kvm or auto", EnvAccel, a)
	}
	if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err == nil {
		f.Close()
		for _, m := range []string{"/sys/module/kvm_intel", "/sys/module/kvm_amd"} {
			if _, err := os.Stat(m); err == nil {
				return "kvm", nil
			}
		}
	}
	return "tcg", nil
}

// qboot is a minimal firmware that boots -kernel faster than SeaBIOS; used when present.
const qboot = "/usr/share/qemu/qboot.rom"

// chardevPath escapes a path for a QEMU option value, where ',' separates options.
func chardevPath(p string) string { return strings.ReplaceAll(p, ",", ",,") }

// qemuArgs builds the QEMU command line. ttyS0 is the kernel console (QEMU's stdout);
// ttyS1 carries the guest line protocol into protoFile.
func qemuArgs(accel, kernelImage, initrd, protoFile string, cfg Config) []string {
	args := []string{}
	if accel == "kvm" {
		args = append(args, "-accel", "kvm", "-cpu", "host")
	} else {
		args = append(args, "-accel", "tcg,thread=multi", "-cpu", "max")
	}
	if _, err := os.Stat(qboot); err == nil {
		args = append(args, "-bios", qboot)
	}
	args = append(args,
		"-smp", strconv.Itoa(cfg.CPUs),
		"-m", strconv.Itoa(cfg.MemoryMB)+"M",
		"-nodefaults", "-display", "none", "-no-reboot",
		"-serial", "stdio",
		"-serial", "file:"+chardevPath(protoFile),
		"-kernel", kernelImage,
		"-initrd", initrd,
		"-append", "console=ttyS0 quiet panic=-1",
	)
	return args
}

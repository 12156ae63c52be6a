// Command guestprobe is the real-kernel harness's own guest check (internal/vmtest): a
// static Go binary that opens every uverbs character device the way the uverbs package
// does, and checks it against sysfs: the device number of the node equals
// class/infiniband_verbs/uverbsN/dev, and ibdev names an RDMA device. It prints one line per
// device and exits non-zero on any mismatch or when there is no device. It also checks the
// environment the harness promises (SHIFT_VM_GUEST=1, SHIFT_UVERBS_DEVICE naming an opened
// device) and echoes GUESTPROBE_TAG, so per-binary environment entries are tested too.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

func main() {
	devs, _ := filepath.Glob("/sys/class/infiniband_verbs/uverbs*")
	if len(devs) == 0 {
		fmt.Println("guestprobe: no uverbs device in /sys/class/infiniband_verbs")
		os.Exit(1)
	}
	abi := read("/sys/class/infiniband_verbs/abi_version")
	failed := false
	opened := map[string]bool{}
	for _, d := range devs {
		if err := probe(d, abi); err != nil {
			fmt.Println("guestprobe:", err)
			failed = true
		} else {
			opened["/dev/infiniband/"+filepath.Base(d)] = true
		}
	}
	if os.Getenv("SHIFT_VM_GUEST") != "1" {
		fmt.Println("guestprobe: SHIFT_VM_GUEST is not 1")
		failed = true
	}
	if dev := os.Getenv("SHIFT_UVERBS_DEVICE"); !opened[dev] {
		fmt.Printf("guestprobe: SHIFT_UVERBS_DEVICE=%q is not a device that opened\n", dev)
		failed = true
	}
	fmt.Printf("guestprobe: tag %q\n", os.Getenv("GUESTPROBE_TAG"))
	if failed {
		os.Exit(1)
	}
}

func probe(sysDir, abi string) error {
	name := filepath.Base(sysDir)
	node := "/dev/infiniband/" + name
	f, err := os.OpenFile(node, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", node, err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("fstat %s: %w", node, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return fmt.Errorf("%s is not a character device (mode %o)", node, st.Mode)
	}
	got := fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	if want := read(filepath.Join(sysDir, "dev")); got != want {
		return fmt.Errorf("%s is %s, sysfs says %s", node, got, want)
	}
	ibdev := read(filepath.Join(sysDir, "ibdev"))
	if ibdev == "" {
		return fmt.Errorf("%s: no ibdev in sysfs", name)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/infiniband", ibdev)); err != nil {
		return fmt.Errorf("%s: ibdev %q not in /sys/class/infiniband: %w", name, ibdev, err)
	}
	fmt.Printf("guestprobe: %s -> %s, cdev %s, abi_version %s (uverbs %s), opened read-write\n",
		node, ibdev, got, read(filepath.Join(sysDir, "abi_version")), abi)
	return nil
}

func read(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

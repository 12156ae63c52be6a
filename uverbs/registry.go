package uverbs

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
)

// An emulated kernel registers its devices here so that listing and opening by name work the
// same for real and emulated devices: Devices merges sysfs with the registry, Open looks the
// name up in both.

// OpenFunc opens a new command file on a registered device, as open(2) on its cdev would.
type OpenFunc func() (File, error)

type registered struct {
	info DeviceInfo
	open OpenFunc
}

var registry struct {
	sync.Mutex
	devs map[string]registered
}

// Register adds an emulated device. The name must not collide with another registered device.
// The returned function removes it again.
func Register(info DeviceInfo, open OpenFunc) (unregister func(), err error) {
	if info.Name == "" || open == nil {
		return nil, fmt.Errorf("uverbs: register: name and open function required: %w", ErrMalformed)
	}
	info.Emulated = true
	registry.Lock()
	defer registry.Unlock()
	if registry.devs == nil {
		registry.devs = map[string]registered{}
	}
	if _, dup := registry.devs[info.Name]; dup {
		return nil, fmt.Errorf("uverbs: register %s: %w", info.Name, os.ErrExist)
	}
	registry.devs[info.Name] = registered{info, open}
	return func() {
		registry.Lock()
		defer registry.Unlock()
		delete(registry.devs, info.Name)
	}, nil
}

func registeredDevices() []registered {
	registry.Lock()
	defer registry.Unlock()
	out := make([]registered, 0, len(registry.devs))
	for _, r := range registry.devs {
		out = append(out, r)
	}
	return out
}

// DefaultSysfs is the discovery used by Devices and Open: sysfs at $SYSFS_PATH (the variable
// libibverbs honours) or /sys, character devices under /dev/infiniband.
func DefaultSysfs() Sysfs { return Sysfs{Root: os.Getenv("SYSFS_PATH")} }

// Devices lists the real devices in sysfs and the registered emulated ones, sorted by name.
func Devices() ([]DeviceInfo, error) { return DefaultSysfs().ListAll() }

// ListAll is Devices over this sysfs. A registered device shadows a sysfs device of the same
// name (as Open prefers it).
func (s Sysfs) ListAll() ([]DeviceInfo, error) {
	found, err := s.Devices()
	if err != nil {
		return nil, err
	}
	regs := registeredDevices()
	byName := map[string]bool{}
	for _, r := range regs {
		byName[r.info.Name] = true
	}
	real := found[:0]
	for _, d := range found {
		if !byName[d.Name] {
			real = append(real, d)
		}
	}
	for _, r := range regs {
		real = append(real, r.info)
	}
	sort.Slice(real, func(i, j int) bool { return real[i].Name < real[j].Name })
	return real, nil
}

// Open opens the device named name (an ibdev name such as mlx5_0, or a registered emulated
// device), after checking its ABI version.
func Open(name string) (File, DeviceInfo, error) { return DefaultSysfs().Open(name) }

// Open is the package-level Open over this sysfs. Registered devices win over sysfs ones.
func (s Sysfs) Open(name string) (File, DeviceInfo, error) {
	for _, r := range registeredDevices() {
		if r.info.Name == name {
			f, err := r.open()
			if err != nil {
				return nil, r.info, fmt.Errorf("uverbs: open %s: %w", name, err)
			}
			return f, r.info, nil
		}
	}
	devs, err := s.Devices()
	if err != nil {
		return nil, DeviceInfo{}, err
	}
	for _, d := range devs {
		if d.Name == name || d.Uverbs == name {
			f, err := s.OpenDevice(d)
			return f, d, err
		}
	}
	// The caller names the device in its own context (provider: open NAME: ...): say only
	// what there is instead.
	var names []string
	for _, r := range registeredDevices() {
		names = append(names, r.info.Name)
	}
	for _, d := range devs {
		names = append(names, d.Name)
	}
	here := "none"
	if len(names) > 0 {
		here = strings.Join(names, ", ")
	}
	return nil, DeviceInfo{}, fmt.Errorf("%w (devices here: %s)", ErrNoDevice, here)
}

// OpenDevice opens a device found in sysfs after checking that the uverbs core speaks ABI
// version AbiVersion (6; class/infiniband_verbs/abi_version). The device's own abi_version is
// the driver's ABI (mlx5: 1, rxe: 2): the provider checks it with CheckDriverABI.
func (s Sysfs) OpenDevice(d DeviceInfo) (*Cdev, error) {
	v, err := s.ClassABIVersion()
	if err != nil {
		return nil, fmt.Errorf("uverbs: open %s: %w", d.Name, err)
	}
	if v != AbiVersion {
		return nil, fmt.Errorf("uverbs: open %s: class abi_version %d, want %d: %w", d.Name, v, AbiVersion, ErrABIVersion)
	}
	return OpenCdev(d.Path)
}

// CheckDriverABI reports ErrABIVersion unless the device's driver ABI version lies in
// [lo, hi], the range a provider supports (rdma-core's match_min_abi_version/max).
func (d DeviceInfo) CheckDriverABI(lo, hi int) error {
	if d.ABIVersion < lo || d.ABIVersion > hi {
		return fmt.Errorf("uverbs: %s: driver abi_version %d not in [%d, %d]: %w", d.Name, d.ABIVersion, lo, hi, ErrABIVersion)
	}
	return nil
}

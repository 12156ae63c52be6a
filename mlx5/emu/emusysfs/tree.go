package emusysfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shift-rdma/shift/mlx5/emu"
)

// Identity is what a device claims to be.
type Identity string

// Identities.
const (
	// Shift: modalias shift:emu, matched only by libmlx5-shift.
	Shift Identity = "shift"
	// ConnectX: the PCI identity of a ConnectX-6 (15b3:101b), so that Debian's libmlx5 would
	// claim it too, plus the marker device/shift_emu that tells libmlx5-shift to emulate it.
	ConnectX Identity = "connectx"
)

// Modalias strings of the identities.
const (
	ShiftModalias    = "shift:emu"
	ConnectXModalias = "pci:v000015B3d0000101Bsv000015B3sd00000008bc02sc00i00"
	// Marker is the file under class/infiniband/<dev>/device that marks a device with a
	// ConnectX identity as emulated.
	Marker = "shift_emu"
)

// GIDTableLen is the GID table size each port reports (a ConnectX-6's, as the emulator
// answers query_port).
const GIDTableLen = 256

// Device is one emulated device.
type Device struct {
	Name     string     // ibdev name, e.g. shift0
	IP       netip.Addr // address of the port's RoCE v2 GID; the emulated NIC binds it
	Netdev   string     // the interface holding IP ("" leaves gid_attrs/ndevs out)
	Identity Identity   // "" means Shift
}

// Tree is a written tree and its command-device stand-ins.
type Tree struct {
	Root    string            `json:"root"`
	DevDir  string            `json:"dev_dir"`
	Devices []Device          `json:"devices"`
	Uverbs  map[string]string `json:"uverbs"` // device name → uverbsN
	Links   []string          `json:"links"`  // stand-ins created
}

// stateFile records a tree in its root, so a later Remove (another process) finds what to
// remove.
const stateFile = "shift-emu.json"

// DefaultDevDir is where libibverbs opens command devices (compiled into it).
const DefaultDevDir = "/dev/infiniband"

// ErrExists: root already holds a tree, or a device name repeats.
var ErrExists = errors.New("emusysfs: already exists")

// Options tune Create.
type Options struct {
	// DevDir is the directory of the stand-ins ("" means DefaultDevDir, the only one
	// libibverbs looks in; tests of the writer may point it elsewhere).
	DevDir string
	// FirstUverbs is the lowest N for uverbsN (default 64, above what a host's real devices
	// use); the next free numbers are taken.
	FirstUverbs int
	// NoStandIns writes the sysfs tree only.
	NoStandIns bool
}

// Create writes the sysfs tree for devs under root (created if missing; it must not hold a
// tree already) and the stand-ins /dev/infiniband/uverbsN -> /dev/full, taking for each
// device a uverbs number no other file in the directory has. Creating the stand-ins needs
// write access to /dev (root). On error, whatever was created is removed.
func Create(root string, devs []Device, o Options) (*Tree, error) {
	if len(devs) == 0 {
		return nil, fmt.Errorf("emusysfs: no devices")
	}
	seen := map[string]bool{}
	for i := range devs {
		d := &devs[i]
		if d.Identity == "" {
			d.Identity = Shift
		}
		if d.Name == "" || strings.ContainsAny(d.Name, "/ \t\n") || len(d.Name) >= 64 {
			return nil, fmt.Errorf("emusysfs: device name %q: want 1 to 63 characters without '/' or blanks", d.Name)
		}
		if seen[d.Name] {
			return nil, fmt.Errorf("emusysfs: device %s twice: %w", d.Name, ErrExists)
		}
		seen[d.Name] = true
		if !d.IP.IsValid() || d.IP.IsUnspecified() {
			return nil, fmt.Errorf("emusysfs: device %s: address %v is not a unicast address", d.Name, d.IP)
		}
		if d.Identity != Shift && d.Identity != ConnectX {
			return nil, fmt.Errorf("emusysfs: device %s: identity %q: want %q or %q", d.Name, d.Identity, Shift, ConnectX)
		}
	}
	if _, err := os.Stat(filepath.Join(root, stateFile)); err == nil {
		return nil, fmt.Errorf("emusysfs: %s holds a tree already (remove it first): %w", root, ErrExists)
	}
	t := &Tree{Root: root, DevDir: o.DevDir, Devices: devs, Uverbs: map[string]string{}}
	if t.DevDir == "" {
		t.DevDir = DefaultDevDir
	}
	first := o.FirstUverbs
	if first <= 0 {
		first = 64
	}
	ok := false
	defer func() {
		if !ok {
			_ = t.Remove()
		}
	}()
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("emusysfs: %w", err)
	}
	if !o.NoStandIns {
		if err := os.MkdirAll(t.DevDir, 0o755); err != nil {
			return nil, fmt.Errorf("emusysfs: command devices need %s (root): %w", t.DevDir, err)
		}
	}
	n := first
	for _, d := range devs {
		uv, err := t.standIn(&n, o.NoStandIns)
		if err != nil {
			return nil, err
		}
		t.Uverbs[d.Name] = uv
		if err := writeDevice(root, uv, d); err != nil {
			return nil, err
		}
	}
	if err := writeFile(filepath.Join(root, "class/infiniband_verbs/abi_version"), "6"); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(root, stateFile), b, 0o644); err != nil {
		return nil, fmt.Errorf("emusysfs: %w", err)
	}
	ok = true
	return t, nil
}

// standIn takes the next free uverbs number from *n and creates its stand-in (a symlink
// made with O_EXCL semantics, so two writers never share a number).
func (t *Tree) standIn(n *int, none bool) (string, error) {
	for ; *n < 1<<16; *n++ {
		uv := "uverbs" + strconv.Itoa(*n)
		if _, err := os.Stat(filepath.Join(t.Root, "class/infiniband_verbs", uv)); err == nil {
			continue
		}
		if none {
			*n++
			return uv, nil
		}
		p := filepath.Join(t.DevDir, uv)
		err := os.Symlink("/dev/full", p)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("emusysfs: stand-in %s: %w", p, err)
		}
		t.Links = append(t.Links, p)
		*n++
		return uv, nil
	}
	return "", fmt.Errorf("emusysfs: no free uverbs number in %s", t.DevDir)
}

func writeFile(p, content string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("emusysfs: %w", err)
	}
	if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
		return fmt.Errorf("emusysfs: %w", err)
	}
	return nil
}

// GIDString formats a GID as sysfs prints it: eight groups of four hex digits.
func GIDString(g [16]byte) string {
	var sb strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		fmt.Fprintf(&sb, "%02x%02x", g[i], g[i+1])
	}
	return sb.String()
}

func guidString(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

func writeDevice(root, uv string, d Device) error {
	files := map[string]string{
		"class/infiniband_verbs/" + uv + "/ibdev":       d.Name,
		"class/infiniband_verbs/" + uv + "/dev":         "0:0", // any character device (the stand-in is /dev/full)
		"class/infiniband_verbs/" + uv + "/abi_version": "1",   // mlx5_ib's uverbs driver ABI
	}
	ib := "class/infiniband/" + d.Name + "/"
	guid := guidString(emu.NodeGUIDFor(d.Name))
	files[ib+"node_type"] = "1: CA"
	files[ib+"node_guid"] = guid
	files[ib+"sys_image_guid"] = guid
	files[ib+"board_id"] = "SHIFT_EMULATED"
	files[ib+"hca_type"] = "MT4123"
	if d.Identity == ConnectX {
		files[ib+"device/modalias"] = ConnectXModalias
		files[ib+"device/vendor"] = "0x15b3"
		files[ib+"device/device"] = "0x101b"
		files[ib+"device/"+Marker] = "1"
	} else {
		files[ib+"device/modalias"] = ShiftModalias
	}
	pt := ib + "ports/1/"
	files[pt+"state"] = "4: ACTIVE"
	files[pt+"phys_state"] = "5: LinkUp"
	files[pt+"link_layer"] = "Ethernet"
	files[pt+"rate"] = "100 Gb/sec (4X EDR)"
	files[pt+"lid"] = "0x0"
	files[pt+"sm_lid"] = "0x0"
	files[pt+"lid_mask_count"] = "0"
	files[pt+"pkeys/0"] = "0xffff"
	ip := d.IP.As16()
	for i := 0; i < GIDTableLen; i++ {
		g, typ := [16]byte{}, "IB/RoCE v1" // what the kernel's unpopulated entries read as
		if i == 0 {
			g, typ = ip, "RoCE v2"
		}
		files[pt+"gids/"+strconv.Itoa(i)] = GIDString(g)
		files[pt+"gid_attrs/types/"+strconv.Itoa(i)] = typ
	}
	if d.Netdev != "" {
		files[pt+"gid_attrs/ndevs/0"] = d.Netdev
	}
	for p, c := range files {
		if err := writeFile(filepath.Join(root, p), c); err != nil {
			return err
		}
	}
	return nil
}

// Load reads the tree recorded in root.
func Load(root string) (*Tree, error) {
	b, err := os.ReadFile(filepath.Join(root, stateFile))
	if err != nil {
		return nil, fmt.Errorf("emusysfs: no tree in %s: %w", root, err)
	}
	var t Tree
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("emusysfs: %s: %w", filepath.Join(root, stateFile), err)
	}
	t.Root = root
	return &t, nil
}

// Remove deletes the stand-ins this tree created (only symlinks to /dev/full, never
// anything else) and the tree under its root.
func (t *Tree) Remove() error {
	var errs []error
	for _, l := range t.Links {
		if target, err := os.Readlink(l); err == nil && target == "/dev/full" {
			if err := os.Remove(l); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	t.Links = nil
	for _, sub := range []string{"class", stateFile} {
		if err := os.RemoveAll(filepath.Join(t.Root, sub)); err != nil {
			errs = append(errs, err)
		}
	}
	// The root itself goes only if it is now empty (it may be a directory the caller owns).
	_ = os.Remove(t.Root)
	return errors.Join(errs...)
}

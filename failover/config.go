package failover

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/uverbs"
)

// ParseBackupMap parses the SHIFT_BACKUP syntax: comma-separated "default:backup" pairs,
// e.g. "mlx5_0:mlx5_1,mlx5_1:mlx5_0". A default device named in several pairs gets several
// backups, in the order given. Spaces around names are ignored.
func ParseBackupMap(s string) (map[string][]string, error) {
	m := map[string][]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		d, b, ok := strings.Cut(part, ":")
		d, b = strings.TrimSpace(d), strings.TrimSpace(b)
		if !ok || d == "" || b == "" || strings.Contains(b, ":") {
			return nil, fmt.Errorf("failover: SHIFT_BACKUP entry %q: %w: want default:backup", part, ErrBadConfig)
		}
		if d == b {
			return nil, fmt.Errorf("failover: SHIFT_BACKUP entry %q: %w: a device cannot back itself up", part, ErrBadConfig)
		}
		m[d] = append(m[d], b)
	}
	return m, nil
}

// chooseBackups returns the backup devices of def: Options.Backups, else every other device
// with an active port that has a RoCEv2 GID (automatic selection; the edges turn SHIFT_BACKUP
// into Options.Backups). Automatic selection cannot tell which devices share this host when
// several emulated hosts live in one process: tests and the demo name the backup explicitly.
func chooseBackups(def string, opts Options) ([]string, error) {
	if len(opts.Backups) > 0 {
		return opts.Backups, nil
	}
	devs, err := provider.Devices()
	if err != nil {
		return nil, fmt.Errorf("failover: open %s: list devices: %w", def, err)
	}
	var out []string
	for _, d := range devs {
		if d.Name == def {
			continue
		}
		for _, p := range d.Ports {
			if p.State == int(uverbs.PortActive) && hasRoCEv2(p) {
				out = append(out, d.Name)
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("failover: open %s: %w: no other device has an active port", def, ErrNoBackup)
	}
	return out, nil
}

// InjectSpec is a failure injection armed when a context opens (Options.Inject): the N-th
// next WR carrying a local key on QP QPN (0: on any QP) gets an invalid key, its QP fails,
// and SHIFT resubmits the WRs correctly on the backup. N == 0 arms nothing.
type InjectSpec struct {
	QPN uint32
	N   int64
}

// ParseInject parses the SHIFT_INJECT syntax "<qpn|all>:<n>" (qpn decimal or 0x hex, n ≥ 1).
func ParseInject(s string) (InjectSpec, error) {
	q, n, ok := strings.Cut(s, ":")
	if !ok {
		return InjectSpec{}, fmt.Errorf("failover: injection %q: %w: want <qpn|all>:<n>", s, ErrBadConfig)
	}
	var spec InjectSpec
	if q != "all" {
		v, err := strconv.ParseUint(q, 0, 24)
		if err != nil || v == 0 {
			return InjectSpec{}, fmt.Errorf("failover: injection %q: %w: bad QPN", s, ErrBadConfig)
		}
		spec.QPN = uint32(v)
	}
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil || v < 1 {
		return InjectSpec{}, fmt.Errorf("failover: injection %q: %w: n must be ≥ 1", s, ErrBadConfig)
	}
	spec.N = v
	return spec, nil
}

// check refuses what ParseInject never returns: a negative count, a QPN above 24 bits.
func (s InjectSpec) check() error {
	if s.N < 0 || s.QPN >= 1<<24 {
		return fmt.Errorf("failover: Options.Inject %+v: %w: want N ≥ 0 and a 24-bit QPN", s, ErrBadConfig)
	}
	return nil
}

func hasRoCEv2(p uverbs.PortInfo) bool {
	for _, g := range p.GIDs {
		if strings.Contains(strings.ToLower(g.Type), "v2") {
			return true
		}
	}
	return false
}

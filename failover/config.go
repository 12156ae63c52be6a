package failover

import (
	"fmt"
	"os"
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

// chooseBackups returns the backup devices of def: Options.Backups, else SHIFT_BACKUP, else
// every other device with an active port that has a RoCEv2 GID (automatic selection).
// Automatic selection cannot tell which devices share this host when several emulated hosts
// live in one process: tests and the demo name the backup explicitly.
func chooseBackups(def string, opts Options) ([]string, error) {
	if len(opts.Backups) > 0 {
		return opts.Backups, nil
	}
	if env := os.Getenv("SHIFT_BACKUP"); env != "" {
		m, err := ParseBackupMap(env)
		if err != nil {
			return nil, err
		}
		if b := m[def]; len(b) > 0 {
			return b, nil
		}
		return nil, fmt.Errorf("failover: open %s: %w: SHIFT_BACKUP names no backup for it", def, ErrNoBackup)
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

// injectSpec is a parsed SHIFT_INJECT value.
type injectSpec struct {
	qpn uint32 // 0: every QP
	n   int64  // the n-th next WR (1: the next one)
}

// parseInject parses "<qpn|all>:<n>" (qpn decimal or 0x hex).
func parseInject(s string) (injectSpec, error) {
	q, n, ok := strings.Cut(s, ":")
	if !ok {
		return injectSpec{}, fmt.Errorf("failover: SHIFT_INJECT %q: %w: want <qpn|all>:<n>", s, ErrBadConfig)
	}
	var spec injectSpec
	if q != "all" {
		v, err := strconv.ParseUint(q, 0, 24)
		if err != nil || v == 0 {
			return injectSpec{}, fmt.Errorf("failover: SHIFT_INJECT %q: %w: bad QPN", s, ErrBadConfig)
		}
		spec.qpn = uint32(v)
	}
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil || v < 1 {
		return injectSpec{}, fmt.Errorf("failover: SHIFT_INJECT %q: %w: n must be ≥ 1", s, ErrBadConfig)
	}
	spec.n = v
	return spec, nil
}

func hasRoCEv2(p uverbs.PortInfo) bool {
	for _, g := range p.GIDs {
		if strings.Contains(strings.ToLower(g.Type), "v2") {
			return true
		}
	}
	return false
}

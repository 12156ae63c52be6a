package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// linkState is what rtnetlink says about a link (struct ifinfomsg and the IFLA_*
// attributes of include/uapi/linux/rtnetlink.h and if_link.h).
type linkState struct {
	index     int
	name      string
	flags     uint32 // IFF_* (net_device_flags)
	carrierUp uint32 // IFLA_CARRIER_UP_COUNT
	carrierDn uint32 // IFLA_CARRIER_DOWN_COUNT
	hasCounts bool
	gone      bool // RTM_DELLINK, or absent from a dump
}

// usable: administratively up with carrier. IFF_LOWER_UP is the carrier bit itself
// (netif_carrier_ok at the time of the message), where IFF_RUNNING follows the operational
// state that the link watch updates later.
func (s linkState) usable() bool {
	return !s.gone && s.flags&unix.IFF_UP != 0 && s.flags&unix.IFF_LOWER_UP != 0
}

func (s linkState) carrier() bool { return !s.gone && s.flags&unix.IFF_LOWER_UP != 0 }

// parseLink decodes an RTM_NEWLINK or RTM_DELLINK message.
func parseLink(m syscall.NetlinkMessage) (linkState, error) {
	if len(m.Data) < unix.SizeofIfInfomsg {
		return linkState{}, fmt.Errorf("probe: rtnetlink: %d-byte link message: %w", len(m.Data), unix.EBADMSG)
	}
	// struct ifinfomsg: family u8, pad u8, type u16, index s32, flags u32, change u32.
	st := linkState{
		index: int(int32(binary.NativeEndian.Uint32(m.Data[4:8]))),
		flags: binary.NativeEndian.Uint32(m.Data[8:12]),
		gone:  m.Header.Type == unix.RTM_DELLINK,
	}
	attrs, err := nl.ParseRouteAttr(m.Data[unix.SizeofIfInfomsg:])
	if err != nil {
		return linkState{}, fmt.Errorf("probe: rtnetlink: link %d attributes: %w", st.index, err)
	}
	var up, dn bool
	for _, a := range attrs {
		switch a.Attr.Type {
		case unix.IFLA_IFNAME:
			st.name = nl.BytesToString(a.Value)
		case unix.IFLA_CARRIER_UP_COUNT:
			if len(a.Value) >= 4 {
				st.carrierUp, up = binary.NativeEndian.Uint32(a.Value), true
			}
		case unix.IFLA_CARRIER_DOWN_COUNT:
			if len(a.Value) >= 4 {
				st.carrierDn, dn = binary.NativeEndian.Uint32(a.Value), true
			}
		}
	}
	st.hasCounts = up && dn
	return st, nil
}

// rtextFilterSkipStats is RTEXT_FILTER_SKIP_STATS of include/uapi/linux/rtnetlink.h (not in
// x/sys/unix): IFLA_EXT_MASK bit that leaves the statistics out of link messages.
const rtextFilterSkipStats = 1 << 3

// querySocket sends RTM_GETLINK requests in the watched namespace. Calls are serialised by
// the caller (the watcher's query mutex).
type querySocket struct {
	s *nl.NetlinkSocket
}

// getLink reads one link by index, or by name when index is 0.
func (q *querySocket) getLink(index int, name string) (linkState, error) {
	if index == 0 && len(name) >= unix.IFNAMSIZ {
		// The kernel refuses such a name with ERANGE; no link can have it.
		return linkState{}, fmt.Errorf("probe: get link %q: %w: name longer than %d bytes", name, ErrNoLink, unix.IFNAMSIZ-1)
	}
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(index)
	req.AddData(msg)
	if index == 0 {
		req.AddData(nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(name)))
	}
	// Statistics are most of a link message and are not needed here.
	req.AddData(nl.NewRtAttr(unix.IFLA_EXT_MASK, nl.Uint32Attr(rtextFilterSkipStats)))
	var out []linkState
	if err := q.exchange(req, func(st linkState) { out = append(out, st) }); err != nil {
		if errors.Is(err, unix.ENODEV) {
			return linkState{}, fmt.Errorf("probe: get link %q (index %d): %w: %w", name, index, ErrNoLink, err)
		}
		return linkState{}, fmt.Errorf("probe: get link %q (index %d): %w", name, index, err)
	}
	if len(out) != 1 {
		return linkState{}, fmt.Errorf("probe: get link %q (index %d): %d answers: %w", name, index, len(out), unix.EBADMSG)
	}
	return out[0], nil
}

// dump reads every link of the namespace.
func (q *querySocket) dump() ([]linkState, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_DUMP)
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
	req.AddData(nl.NewRtAttr(unix.IFLA_EXT_MASK, nl.Uint32Attr(rtextFilterSkipStats)))
	var out []linkState
	if err := q.exchange(req, func(st linkState) { out = append(out, st) }); err != nil {
		return nil, fmt.Errorf("probe: dump links: %w", err)
	}
	return out, nil
}

// exchange sends req and passes every link message of the answer to fn, until the ACK,
// NLMSG_DONE (a dump) or an error. Messages of other sequence numbers (answers to a request that
// timed out) are skipped.
func (q *querySocket) exchange(req *nl.NetlinkRequest, fn func(linkState)) error {
	if err := q.s.Send(req); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	for {
		msgs, _, err := q.s.Receive()
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != req.Seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return unix.EBADMSG
				}
				if e := int32(binary.NativeEndian.Uint32(m.Data[:4])); e != 0 {
					return syscall.Errno(-e)
				}
				return nil // the ACK
			case unix.RTM_NEWLINK:
				st, err := parseLink(m)
				if err != nil {
					return err
				}
				fn(st)
			}
		}
	}
}

func (q *querySocket) close() { q.s.Close() }

package failover

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/shift-rdma/shift/provider/verbs"
)

// The KV entries a context publishes for its peers, and the checks applied to every entry
// read back. An entry names the default QP or MR it belongs to, so an entry copied under
// another key, corrupted or forged without that knowledge is refused instead of redirecting a
// backup connection; the fields are range-checked. Entries are big-endian:
//
//	qp entry (shift/<job>/qp/<default GID>/<default QPN>), 53 bytes:
//	  0 version (1) | 1 default GID [16] | 17 default QPN | 21 backup GID [16] |
//	  37 backup QPN | 41 backup PSN | 45 control QPN | 49 control PSN
//	mr entry (shift/<job>/mr/<default GID>/<default rkey>), 41 bytes:
//	  0 version (1) | 1 default GID [16] | 17 default rkey | 21 backup rkey |
//	  25 iova (8) | 33 length (8)
//
// Access control is the store's (a private directory, Redis ACLs); these checks catch what
// slips through it, never a peer that may write the store.

const (
	kvEntryVersion = 1
	qpEntrySize    = 53
	mrEntrySize    = 41
	psnMask        = 0xffffff
)

// qpEntry is what a context publishes for one of its QPs.
type qpEntry struct {
	defGID       [16]byte
	defQPN       uint32
	backup, ctrl verbs.Endpoint // GID, QPN and PSN of the backup and control QPs
}

func (e *qpEntry) marshal() []byte {
	b := make([]byte, qpEntrySize)
	b[0] = kvEntryVersion
	copy(b[1:], e.defGID[:])
	binary.BigEndian.PutUint32(b[17:], e.defQPN)
	copy(b[21:], e.backup.GID[:])
	binary.BigEndian.PutUint32(b[37:], e.backup.QPN)
	binary.BigEndian.PutUint32(b[41:], e.backup.PSN)
	binary.BigEndian.PutUint32(b[45:], e.ctrl.QPN)
	binary.BigEndian.PutUint32(b[49:], e.ctrl.PSN)
	return b
}

// parseQPEntry decodes b, the entry looked up for the peer's default QP (gid, qpn).
func parseQPEntry(b []byte, gid [16]byte, qpn uint32) (qpEntry, error) {
	var e qpEntry
	if len(b) != qpEntrySize || b[0] != kvEntryVersion {
		return e, fmt.Errorf("failover: QP entry of %#x: %d bytes, version %d: %w", qpn, len(b), firstByte(b), ErrBadEntry)
	}
	copy(e.defGID[:], b[1:])
	e.defQPN = binary.BigEndian.Uint32(b[17:])
	copy(e.backup.GID[:], b[21:])
	e.backup.QPN = binary.BigEndian.Uint32(b[37:])
	e.backup.PSN = binary.BigEndian.Uint32(b[41:])
	e.ctrl.GID = e.backup.GID
	e.ctrl.QPN = binary.BigEndian.Uint32(b[45:])
	e.ctrl.PSN = binary.BigEndian.Uint32(b[49:])
	switch {
	case e.defGID != gid || e.defQPN != qpn:
		return e, fmt.Errorf("failover: QP entry looked up for %#x names QP %#x of another GID or QPN: %w", qpn, e.defQPN, ErrBadEntry)
	case !validQPN(e.backup.QPN) || !validQPN(e.ctrl.QPN) || e.backup.QPN == e.ctrl.QPN:
		return e, fmt.Errorf("failover: QP entry of %#x: backup QPN %#x, control QPN %#x: %w", qpn, e.backup.QPN, e.ctrl.QPN, ErrBadEntry)
	case e.backup.PSN&^psnMask != 0 || e.ctrl.PSN&^psnMask != 0:
		return e, fmt.Errorf("failover: QP entry of %#x: PSNs %#x, %#x beyond 24 bits: %w", qpn, e.backup.PSN, e.ctrl.PSN, ErrBadEntry)
	case e.backup.GID == [16]byte{} || e.backup.GID == gid:
		return e, fmt.Errorf("failover: QP entry of %#x: backup GID %x (zero, or the default one): %w", qpn, e.backup.GID, ErrBadEntry)
	}
	return e, nil
}

// mrEntry is what a context publishes for one of its MRs.
type mrEntry struct {
	defGID       [16]byte
	defRKey      uint32
	backupRKey   uint32
	iova, length uint64
}

func (e *mrEntry) marshal() []byte {
	b := make([]byte, mrEntrySize)
	b[0] = kvEntryVersion
	copy(b[1:], e.defGID[:])
	binary.BigEndian.PutUint32(b[17:], e.defRKey)
	binary.BigEndian.PutUint32(b[21:], e.backupRKey)
	binary.BigEndian.PutUint64(b[25:], e.iova)
	binary.BigEndian.PutUint64(b[33:], e.length)
	return b
}

// parseMREntry decodes b, the entry looked up for the peer's default rkey (gid, rkey).
func parseMREntry(b []byte, gid [16]byte, rkey uint32) (mrEntry, error) {
	var e mrEntry
	if len(b) != mrEntrySize || b[0] != kvEntryVersion {
		return e, fmt.Errorf("failover: MR entry of rkey %#x: %d bytes, version %d: %w", rkey, len(b), firstByte(b), ErrBadEntry)
	}
	copy(e.defGID[:], b[1:])
	e.defRKey = binary.BigEndian.Uint32(b[17:])
	e.backupRKey = binary.BigEndian.Uint32(b[21:])
	e.iova = binary.BigEndian.Uint64(b[25:])
	e.length = binary.BigEndian.Uint64(b[33:])
	switch {
	case !bytes.Equal(e.defGID[:], gid[:]) || e.defRKey != rkey:
		return e, fmt.Errorf("failover: MR entry looked up for rkey %#x names rkey %#x of another GID or key: %w", rkey, e.defRKey, ErrBadEntry)
	case e.length == 0 || e.iova+e.length < e.iova:
		return e, fmt.Errorf("failover: MR entry of rkey %#x: range %#x+%#x: %w", rkey, e.iova, e.length, ErrBadEntry)
	}
	return e, nil
}

// mapAccess is the backup rkey for an access of n bytes at addr, which must lie within the
// MR the entry describes.
func (e *mrEntry) mapAccess(addr, n uint64) (uint32, error) {
	if addr < e.iova || addr-e.iova > e.length || n > e.length-(addr-e.iova) {
		return 0, fmt.Errorf("failover: %d bytes at %#x outside the MR of rkey %#x (%#x+%#x) its entry describes: %w",
			n, addr, e.defRKey, e.iova, e.length, ErrBadEntry)
	}
	return e.backupRKey, nil
}

func validQPN(n uint32) bool { return n != 0 && n <= psnMask }

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

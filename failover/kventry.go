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
//	qp entry (shift/<job>/qp/<default GID>/<default QPN>[/b<i>]), 53 bytes:
//	  0 version (2) | 1 default GID [16] | 17 default QPN | 21 backup GID [16] |
//	  37 backup QPN | 41 backup PSN | 45 control id of the owner's context (8)
//	control entry (shift/<job>/ctl/<from id>/<to id>/<i>), 41 bytes:
//	  0 version (2) | 1 from id (8) | 9 to id (8) | 17 backup GID [16] | 33 control QPN |
//	  37 control PSN
//	mr entry (shift/<job>/mr/<default GID>/<default rkey>), 41 bytes:
//	  0 version (1) | 1 default GID [16] | 17 default rkey | 21 backup rkey |
//	  25 iova (8) | 33 length (8)
//
// Version 1 of the qp entry carried a control QP of the QP's own (QPN and PSN where the
// control id is now); the control QP pair is now shared by every QP between two contexts
// (ctlep.go): the qp entry names the owner's context, whose control entry towards the
// reader's context gives the control QP.
//
// Access control is the store's (a private directory, Redis ACLs); these checks catch what
// slips through it, never a peer that may write the store.

const (
	kvEntryVersion = 1 // mr entries
	qpEntryVersion = 2 // qp and control entries
	qpEntrySize    = 53
	ctlEntrySize   = 41
	mrEntrySize    = 41
	psnMask        = 0xffffff
)

// qpEntry is what a context publishes for one of its QPs.
type qpEntry struct {
	defGID [16]byte
	defQPN uint32
	backup verbs.Endpoint // GID, QPN and PSN of the backup QP
	ctlID  uint64         // the owner context's control id (Context.ctlID)
}

func (e *qpEntry) marshal() []byte {
	b := make([]byte, qpEntrySize)
	b[0] = qpEntryVersion
	copy(b[1:], e.defGID[:])
	binary.BigEndian.PutUint32(b[17:], e.defQPN)
	copy(b[21:], e.backup.GID[:])
	binary.BigEndian.PutUint32(b[37:], e.backup.QPN)
	binary.BigEndian.PutUint32(b[41:], e.backup.PSN)
	binary.BigEndian.PutUint64(b[45:], e.ctlID)
	return b
}

// parseQPEntry decodes b, the entry looked up for the peer's default QP (gid, qpn).
func parseQPEntry(b []byte, gid [16]byte, qpn uint32) (qpEntry, error) {
	var e qpEntry
	if len(b) != qpEntrySize || b[0] != qpEntryVersion {
		return e, fmt.Errorf("failover: QP entry of %#x: %d bytes, version %d: %w", qpn, len(b), firstByte(b), ErrBadEntry)
	}
	copy(e.defGID[:], b[1:])
	e.defQPN = binary.BigEndian.Uint32(b[17:])
	copy(e.backup.GID[:], b[21:])
	e.backup.QPN = binary.BigEndian.Uint32(b[37:])
	e.backup.PSN = binary.BigEndian.Uint32(b[41:])
	e.ctlID = binary.BigEndian.Uint64(b[45:])
	switch {
	case e.defGID != gid || e.defQPN != qpn:
		return e, fmt.Errorf("failover: QP entry looked up for %#x names QP %#x of another GID or QPN: %w", qpn, e.defQPN, ErrBadEntry)
	case !validQPN(e.backup.QPN):
		return e, fmt.Errorf("failover: QP entry of %#x: backup QPN %#x: %w", qpn, e.backup.QPN, ErrBadEntry)
	case e.backup.PSN&^psnMask != 0:
		return e, fmt.Errorf("failover: QP entry of %#x: PSN %#x beyond 24 bits: %w", qpn, e.backup.PSN, ErrBadEntry)
	case e.ctlID == 0:
		return e, fmt.Errorf("failover: QP entry of %#x: no control id: %w", qpn, ErrBadEntry)
	case e.backup.GID == [16]byte{} || e.backup.GID == gid:
		return e, fmt.Errorf("failover: QP entry of %#x: backup GID %x (zero, or the default one): %w", qpn, e.backup.GID, ErrBadEntry)
	}
	return e, nil
}

// ctlEntry is what a context publishes for its control QP towards one peer context on one
// backup device (ctlep.go).
type ctlEntry struct {
	from, to uint64         // the control ids of the owner's context and of the peer's
	ep       verbs.Endpoint // GID, QPN and PSN of the control QP
}

func (e *ctlEntry) marshal() []byte {
	b := make([]byte, ctlEntrySize)
	b[0] = qpEntryVersion
	binary.BigEndian.PutUint64(b[1:], e.from)
	binary.BigEndian.PutUint64(b[9:], e.to)
	copy(b[17:], e.ep.GID[:])
	binary.BigEndian.PutUint32(b[33:], e.ep.QPN)
	binary.BigEndian.PutUint32(b[37:], e.ep.PSN)
	return b
}

// parseCtlEntry decodes b, the entry looked up for the control QP of context from towards
// context to, on the backup device whose GID (from the QP entry) is gid.
func parseCtlEntry(b []byte, from, to uint64, gid [16]byte) (ctlEntry, error) {
	var e ctlEntry
	if len(b) != ctlEntrySize || b[0] != qpEntryVersion {
		return e, fmt.Errorf("failover: control entry of %#x towards %#x: %d bytes, version %d: %w", from, to, len(b), firstByte(b), ErrBadEntry)
	}
	e.from = binary.BigEndian.Uint64(b[1:])
	e.to = binary.BigEndian.Uint64(b[9:])
	copy(e.ep.GID[:], b[17:])
	e.ep.QPN = binary.BigEndian.Uint32(b[33:])
	e.ep.PSN = binary.BigEndian.Uint32(b[37:])
	switch {
	case e.from != from || e.to != to:
		return e, fmt.Errorf("failover: control entry looked up for %#x towards %#x names %#x towards %#x: %w", from, to, e.from, e.to, ErrBadEntry)
	case !validQPN(e.ep.QPN) || e.ep.PSN&^psnMask != 0:
		return e, fmt.Errorf("failover: control entry of %#x: QPN %#x, PSN %#x: %w", from, e.ep.QPN, e.ep.PSN, ErrBadEntry)
	case e.ep.GID != gid:
		return e, fmt.Errorf("failover: control entry of %#x: GID %x, not the backup GID %x of its QP entries: %w", from, e.ep.GID, gid, ErrBadEntry)
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

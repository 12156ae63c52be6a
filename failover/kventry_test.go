package failover

import (
	"bytes"
	"errors"
	"testing"

	"github.com/shift-rdma/shift/provider/verbs"
)

var (
	entryGID  = [16]byte{0: 0xfe, 15: 1}
	backupGID = [16]byte{0: 0xfe, 15: 2}
)

func goodQPEntry() qpEntry {
	return qpEntry{defGID: entryGID, defQPN: 0x123,
		backup: verbs.Endpoint{GID: backupGID, QPN: 0x456, PSN: 0xabcdef}, ctlID: 0x1122334455667788}
}

const (
	ctlFrom = 0x1122334455667788
	ctlTo   = 0x99aabbccddeeff00
)

func goodCtlEntry() ctlEntry {
	return ctlEntry{from: ctlFrom, to: ctlTo, ep: verbs.Endpoint{GID: backupGID, QPN: 0x457, PSN: 0x12}}
}

func TestQPEntry(t *testing.T) {
	e := goodQPEntry()
	got, err := parseQPEntry(e.marshal(), entryGID, 0x123)
	if err != nil || got != e {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for name, c := range map[string]struct {
		mut      func(*qpEntry)
		gid      [16]byte
		qpn      uint32
		truncate int
		version  byte
	}{
		"another QP's entry":   {qpn: 0x124},
		"another GID's entry":  {gid: backupGID},
		"backup QPN 0":         {mut: func(e *qpEntry) { e.backup.QPN = 0 }},
		"backup QPN 25 bits":   {mut: func(e *qpEntry) { e.backup.QPN = 1 << 24 }},
		"no control id":        {mut: func(e *qpEntry) { e.ctlID = 0 }},
		"PSN 25 bits":          {mut: func(e *qpEntry) { e.backup.PSN = 1 << 24 }},
		"zero backup GID":      {mut: func(e *qpEntry) { e.backup.GID = [16]byte{} }},
		"backup GID = default": {mut: func(e *qpEntry) { e.backup.GID = entryGID }},
		"short":                {truncate: 1},
		"old 32-byte entry":    {truncate: qpEntrySize - 32},
		"version 1":            {version: 1},
	} {
		e := goodQPEntry()
		if c.mut != nil {
			c.mut(&e)
		}
		gid, qpn := entryGID, uint32(0x123)
		if c.gid != ([16]byte{}) {
			gid = c.gid
		}
		if c.qpn != 0 {
			qpn = c.qpn
		}
		b := e.marshal()
		b = b[:len(b)-c.truncate]
		if c.version != 0 {
			b[0] = c.version
		}
		if _, err := parseQPEntry(b, gid, qpn); !errors.Is(err, ErrBadEntry) {
			t.Errorf("%s: %v, want ErrBadEntry", name, err)
		}
	}
}

// TestCtlEntry: a control entry is accepted only under the key of the two contexts it names,
// with a control QP on the backup GID of the owner's QP entries.
func TestCtlEntry(t *testing.T) {
	e := goodCtlEntry()
	got, err := parseCtlEntry(e.marshal(), ctlFrom, ctlTo, backupGID)
	if err != nil || got != e {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for name, c := range map[string]struct {
		mut      func(*ctlEntry)
		from, to uint64
		gid      [16]byte
		truncate int
	}{
		"the reverse entry":    {from: ctlTo, to: ctlFrom},
		"another peer's entry": {to: ctlTo + 1},
		"another GID":          {gid: entryGID},
		"QPN 0":                {mut: func(e *ctlEntry) { e.ep.QPN = 0 }},
		"QPN 25 bits":          {mut: func(e *ctlEntry) { e.ep.QPN = 1 << 24 }},
		"PSN 25 bits":          {mut: func(e *ctlEntry) { e.ep.PSN = 1 << 24 }},
		"short":                {truncate: 1},
	} {
		e := goodCtlEntry()
		if c.mut != nil {
			c.mut(&e)
		}
		from, to, gid := uint64(ctlFrom), uint64(ctlTo), backupGID
		if c.from != 0 {
			from = c.from
		}
		if c.to != 0 {
			to = c.to
		}
		if c.gid != ([16]byte{}) {
			gid = c.gid
		}
		b := e.marshal()
		if _, err := parseCtlEntry(b[:len(b)-c.truncate], from, to, gid); !errors.Is(err, ErrBadEntry) {
			t.Errorf("%s: %v, want ErrBadEntry", name, err)
		}
	}
}

func TestMREntry(t *testing.T) {
	e := mrEntry{defGID: entryGID, defRKey: 0x77, backupRKey: 0x99, iova: 0x10000, length: 4096}
	got, err := parseMREntry(e.marshal(), entryGID, 0x77)
	if err != nil || got != e {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for name, c := range map[string]struct {
		e    mrEntry
		rkey uint32
	}{
		"another rkey's entry": {e, 0x78},
		"zero length":          {mrEntry{defGID: entryGID, defRKey: 0x77, backupRKey: 0x99, iova: 1}, 0x77},
		"wrapping range":       {mrEntry{defGID: entryGID, defRKey: 0x77, backupRKey: 0x99, iova: ^uint64(0), length: 2}, 0x77},
		"another GID's entry":  {mrEntry{defGID: backupGID, defRKey: 0x77, backupRKey: 0x99, length: 1}, 0x77},
	} {
		if _, err := parseMREntry(c.e.marshal(), entryGID, c.rkey); !errors.Is(err, ErrBadEntry) {
			t.Errorf("%s: %v, want ErrBadEntry", name, err)
		}
	}
	for _, c := range []struct {
		addr, n uint64
		ok      bool
	}{{0x10000, 4096, true}, {0x10ff0, 16, true}, {0x10000, 0, true}, {0x11000, 0, true},
		{0xffff, 1, false}, {0x10ff0, 17, false}, {0x11001, 0, false}, {0x10000, 1 << 63, false}} {
		if k, err := e.mapAccess(c.addr, c.n); (err == nil) != c.ok || c.ok && k != 0x99 {
			t.Errorf("mapAccess(%#x, %d) = %#x, %v; want ok %v", c.addr, c.n, k, err, c.ok)
		}
	}
	if _, err := parseMREntry([]byte{0, 0, 0, 0x99}, entryGID, 0x77); !errors.Is(err, ErrBadEntry) {
		t.Errorf("the old 4-byte entry: %v", err)
	}
}

// FuzzKVEntries: any bytes read from a store either decode into an entry that names exactly
// the QP or MR looked up, with fields in range, and re-encode to the same bytes, or are
// refused with ErrBadEntry; nothing panics.
func FuzzKVEntries(f *testing.F) {
	q := goodQPEntry()
	f.Add(q.marshal(), uint32(0x123))
	m := mrEntry{defGID: entryGID, defRKey: 0x123, backupRKey: 1, iova: 0, length: 1}
	f.Add(m.marshal(), uint32(0x123))
	f.Add([]byte{}, uint32(0))
	ce := goodCtlEntry()
	f.Add(ce.marshal(), uint32(0))
	f.Fuzz(func(t *testing.T, b []byte, key uint32) {
		if e, err := parseCtlEntry(b, ctlFrom, ctlTo, backupGID); err == nil {
			if e.from != ctlFrom || e.to != ctlTo || e.ep.GID != backupGID || !validQPN(e.ep.QPN) ||
				e.ep.PSN > psnMask || !bytes.Equal(e.marshal(), b) {
				t.Fatalf("accepted control entry %+v from %x", e, b)
			}
		} else if !errors.Is(err, ErrBadEntry) {
			t.Fatalf("control entry refused without ErrBadEntry: %v", err)
		}
		if e, err := parseQPEntry(b, entryGID, key); err == nil {
			if e.defQPN != key || e.defGID != entryGID || !validQPN(e.backup.QPN) || e.ctlID == 0 ||
				e.backup.PSN > psnMask || !bytes.Equal(e.marshal(), b) {
				t.Fatalf("accepted QP entry %+v from %x for %#x", e, b, key)
			}
		} else if !errors.Is(err, ErrBadEntry) {
			t.Fatalf("QP entry refused without ErrBadEntry: %v", err)
		}
		if e, err := parseMREntry(b, entryGID, key); err == nil {
			if e.defRKey != key || e.defGID != entryGID || e.length == 0 || e.iova+e.length < e.iova || !bytes.Equal(e.marshal(), b) {
				t.Fatalf("accepted MR entry %+v from %x for %#x", e, b, key)
			}
		} else if !errors.Is(err, ErrBadEntry) {
			t.Fatalf("MR entry refused without ErrBadEntry: %v", err)
		}
	})
}

// TestForgedEntriesRefused: a QP entry copied under another QP's key, and an MR entry copied
// under another rkey, are refused where the library reads them, instead of connecting the
// backup QP to the wrong peer QP or mapping the wrong rkey.
func TestForgedEntriesRefused(t *testing.T) {
	e := newEnv(t, 64)
	a, b := e.pairs(t, 2, smallCap)
	ca, cb := e.hosts[0].ctx, e.hosts[1].ctx
	ctx, cancel := ca.kvCtx()
	defer cancel()
	other, err := e.kv.Get(ctx, cb.qpKey(cb.gid, b[1].qpn))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.kv.Put(ctx, cb.qpKey(cb.gid, b[0].qpn), other); err != nil {
		t.Fatal(err)
	}
	if err := a[0].connectBackup(a[0].sets[0], verbs.Endpoint{GID: cb.gid, QPN: b[0].qpn}); !errors.Is(err, ErrBadEntry) {
		t.Errorf("QP entry of another QP: %v, want ErrBadEntry", err)
	}
	mrOther, err := e.kv.Get(ctx, cb.mrKey(cb.gid, e.hosts[1].mr.RKey()))
	if err != nil {
		t.Fatal(err)
	}
	const forged = 0x7777
	if err := e.kv.Put(ctx, cb.mrKey(cb.gid, forged), mrOther); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.backupRKey(cb.gid, forged, 0, 0); !errors.Is(err, ErrBackupNotReady) {
		t.Errorf("MR entry not read yet: %v, want ErrBackupNotReady (the cache does no I/O)", err)
	}
	refreshMRs(t, ca, cb.gid)
	if _, err := ca.backupRKey(cb.gid, forged, 0, 0); !errors.Is(err, ErrBadEntry) {
		t.Errorf("MR entry of another rkey: %v, want ErrBadEntry", err)
	}
}

// TestForgedMREntryFailsClosed: a forged entry where the victim reads the peer's entries
// (listed before the fallback: rkcache.go) (the old 4-byte format, another rkey's entry, or a range that does not cover
// the WRITE) makes the fallback fail closed: the application gets the error completion and
// Err names the bad entry; nothing goes to the backup.
func TestForgedMREntryFailsClosed(t *testing.T) {
	for name, forge := range map[string]func(e *testEnv) []byte{
		"truncated": func(*testEnv) []byte { return []byte{0, 0, 0, 1} },
		"another rkey": func(e *testEnv) []byte {
			m := mrEntry{defGID: e.hosts[1].ctx.gid, defRKey: e.hosts[1].mr.RKey() + 1, backupRKey: 1, iova: e.hosts[1].mr.Addr(), length: bufSize}
			return m.marshal()
		},
		"short range": func(e *testEnv) []byte {
			m := mrEntry{defGID: e.hosts[1].ctx.gid, defRKey: e.hosts[1].mr.RKey(), backupRKey: 1, iova: e.hosts[1].mr.Addr(), length: 16}
			return m.marshal()
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 256)
			a, _ := e.pairs(t, 1, smallCap)
			qa, ha, hb := a[0], e.hosts[0], e.hosts[1]
			ctx, cancel := ha.ctx.kvCtx()
			defer cancel()
			if err := e.kv.Put(ctx, hb.ctx.mrKey(hb.ctx.gid, hb.mr.RKey()), forge(e)); err != nil {
				t.Fatal(err)
			}
			// The entry was cached when the QP connected: the fallback reads no entry, so
			// the forged one is refused once the cache has listed it again.
			refreshMRs(t, ha.ctx, hb.ctx.gid)
			ha.ctx.Inject(qa.QPN(), 1)
			if err := qa.PostSend([]verbs.SendWR{{WRID: 9, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{ha.mr.SGE(0, 1024)}, RemoteAddr: hb.mr.Addr(), RKey: hb.mr.RKey()}}); err != nil {
				t.Fatal(err)
			}
			w := waitN(t, ha.cq, 1)[0]
			if w.Status == verbs.WCSuccess || w.WRID != 9 {
				t.Fatalf("completion %+v: want the WRITE's error", w)
			}
			if qa.SendState() != SendFailed || !errors.Is(qa.Err(), ErrBadEntry) {
				t.Fatalf("state %v, err %v: want Failed with ErrBadEntry", qa.SendState(), qa.Err())
			}
			if st := ha.ctx.Stats(); st.Fallbacks != 0 || st.Refused != 1 {
				t.Errorf("stats %+v: want the fallback refused", st)
			}
		})
	}
}

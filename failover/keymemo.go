package failover

// A post on the backup rewrites each WR's local and remote keys through its backup device's
// maps (lkeys, rkeys): sync.Maps whose lookups hash an interface, which cost more than the
// provider's whole post. An application mostly posts from the MRs of the WR before, so each
// QP remembers the last local and the last remote key it mapped (keyMemo: q.km under q.mu or
// inside the send gate's backup mode, backupgate.go; q.kmR for receives, under q.mu). A
// remembered mapping holds while the device's keyGen is unchanged: every change to lkeys or
// rkeys bumps it once the map changed, and the memo reads it before the lookup it keeps.

// keyMemo is a QP's last local and remote key mapping (owned as said above).
type keyMemo struct {
	ldev        *backupDev
	lgen        uint64
	lkey, blkey uint32
	rdev        *backupDev
	rgen        uint64
	rk          rkeyKey
	rec         *mrRec // an entry that passed its checks (err nil)
}

// setLKey and dropLKey change the device's local key map.
func (b *backupDev) setLKey(lkey, blkey uint32) {
	b.lkeys.Store(lkey, blkey)
	b.keyGen.Add(1)
}

func (b *backupDev) dropLKey(lkey uint32) {
	b.lkeys.Delete(lkey)
	b.keyGen.Add(1)
}

// storeRKey and dropRKey change the cache of the peers' entries.
func (b *backupDev) storeRKey(k rkeyKey, r *mrRec) {
	b.rkeys.Store(k, r)
	b.keyGen.Add(1)
}

func (b *backupDev) dropRKey(k rkeyKey, r *mrRec) {
	if b.rkeys.CompareAndDelete(k, r) {
		b.keyGen.Add(1)
	}
}

// lkeyOf is b.backupLKey through the memo m.
func (m *keyMemo) lkeyOf(b *backupDev, lkey uint32) (uint32, bool) {
	g := b.keyGen.Load()
	if m.ldev == b && m.lgen == g && m.lkey == lkey {
		return m.blkey, true
	}
	k, ok := b.backupLKey(lkey)
	if ok {
		m.ldev, m.lgen, m.lkey, m.blkey = b, g, lkey, k
	}
	return k, ok
}

// rkeyOf is b.backupRKey through the memo m.
func (m *keyMemo) rkeyOf(b *backupDev, gid [16]byte, rkey uint32, addr, n uint64) (uint32, error) {
	if r := m.rkeyRec(b, rkeyKey{gid, rkey}); r != nil {
		return r.e.mapAccess(addr, n)
	}
	return b.backupRKey(gid, rkey, addr, n)
}

// rkeyRec is the cache's entry for k when it passed its checks, through the memo m; nil
// otherwise.
func (m *keyMemo) rkeyRec(b *backupDev, k rkeyKey) *mrRec {
	g := b.keyGen.Load()
	if m.rdev == b && m.rgen == g && m.rk == k {
		return m.rec
	}
	v, ok := b.rkeys.Load(k)
	if !ok {
		return nil
	}
	r := v.(*mrRec)
	if r.err != nil {
		return nil
	}
	m.rdev, m.rgen, m.rk, m.rec = b, g, k, r
	return r
}

// rkeyKnown is b.cachedRKey through the memo m.
func (m *keyMemo) rkeyKnown(b *backupDev, k rkeyKey) bool {
	return m.rkeyRec(b, k) != nil || b.cachedRKey(k)
}

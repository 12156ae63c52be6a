package failover

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shift-rdma/shift/failover/kv"
	"github.com/shift-rdma/shift/mlx5"
	"github.com/shift-rdma/shift/provider/verbs"
)

// The cache of the peers' MR entries (issue 12 §5): the remote keys a fallback rewrites are
// resolved before the fallback needs them, and nothing reads the KV store under q.mu.
//
//   - Each backup device keeps, per peer default GID, the peer's MR entries of its index
//     (mr/<GID>/<rkey>[/b<idx>]), checked by parseMREntry as before (b.rkeys).
//   - The shadow goroutine fills it: when a QP towards a peer connects (connectBackup) the
//     peer's entries are listed (kv.Lister), and every known peer is listed again each
//     mrRefreshEvery; a lookup that misses records the wanted key and wakes the goroutine,
//     which reads it (Get) off every lock.
//   - backupRKey answers from the cache only: a key it does not hold is an error wrapping
//     ErrBackupNotReady (and the error of the last read of that key, kv.ErrNotFound or
//     kv.ErrUnavailable, if there was one), so the fallback fails closed as it did for a
//     missing entry.
//   - The race of an MR the peer registered just before the failure (its rkey sent out of
//     band, a WRITE posted with it, the link gone before the next refresh): a fallback round
//     looks for the remote keys of the WRs it will rewrite (the default ring's, the backup
//     log's, those posted during the handshake) before it changes anything; when some are
//     missing it releases q.mu, reads them with the KV timeout and starts again once
//     (fetchMissingRKeysLocked); a key still missing then fails the round closed. A post on
//     the backup leaves such WRs to the inbox, whose drain has the keys read by a goroutine
//     of their own and posts the WRs after (keywait.go): the application's thread does not
//     wait for the store.
//
// A store that is not a kv.Lister is not listed: only the keys that missed are read (Get),
// in the background and by the rounds and inbox readers that need them, so a fallback may
// wait for the store as before once per key.

// mrRefreshDefault is how often the shadow goroutine lists the entries of every peer it has
// a connected QP towards (an MR the peer registered since, or deregistered).
const mrRefreshDefault = time.Second

// mrRec is what the cache holds for one (GID, rkey): the entry, or why there is none (the
// last read found none, could not be made, or found an entry that fails its checks).
type mrRec struct {
	e   mrEntry
	err error
	seq uint64 // b.mrSeq when stored: a listing removes only what it could have seen
}

// mrState is a backup device's bookkeeping of the cache (b.mrMu).
type mrState struct {
	peers map[[16]byte]time.Time // peers listed, and when last
	due   map[[16]byte]bool      // peers to list at the next pass
	want  map[rkeyKey]struct{}   // keys that missed, to read
	seq   uint64
}

// backupRKey maps a remote default rkey of the peer whose default GID is gid to the peer's
// backup rkey of this device's index, from the cache of the peer's entries, for an access of
// n bytes at addr within the range the peer registered (an entry cannot stretch a WR beyond
// its MR). It does no I/O: a key the cache does not hold is an error wrapping
// ErrBackupNotReady, and the shadow goroutine is asked to read it.
func (b *backupDev) backupRKey(gid [16]byte, rkey uint32, addr, n uint64) (uint32, error) {
	k := rkeyKey{gid, rkey}
	if v, ok := b.rkeys.Load(k); ok {
		r := v.(*mrRec)
		if r.err == nil {
			return r.e.mapAccess(addr, n)
		}
		b.wantRKey(k)
		if errors.Is(r.err, ErrBadEntry) {
			return 0, r.err
		}
		return 0, fmt.Errorf("failover: backup rkey of %#x: %w: %w", rkey, ErrBackupNotReady, r.err)
	}
	b.wantRKey(k)
	return 0, fmt.Errorf("failover: backup rkey of %#x: not among the peer's MR entries read so far: %w", rkey, ErrBackupNotReady)
}

// cachedRKey reports whether the cache can answer for k without reading the store: it holds
// the entry, or one that failed its checks (refused without another read).
func (b *backupDev) cachedRKey(k rkeyKey) bool {
	cached, _ := b.rkeyCached(k)
	return cached
}

// rkeyCached is cachedRKey, and whether the entry held passed its checks (ok).
func (b *backupDev) rkeyCached(k rkeyKey) (cached, ok bool) {
	v, found := b.rkeys.Load(k)
	if !found {
		return false, false
	}
	r := v.(*mrRec)
	return r.err == nil || errors.Is(r.err, ErrBadEntry), r.err == nil
}

// wantRKey records a miss and wakes the shadow goroutine to read it.
func (b *backupDev) wantRKey(k rkeyKey) {
	b.mrMu.Lock()
	if b.mr.want == nil {
		b.mr.want = map[rkeyKey]struct{}{}
	}
	b.mr.want[k] = struct{}{}
	b.mrMu.Unlock()
	b.kick()
}

func (b *backupDev) kick() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *backupDev) nextSeq() uint64 {
	b.mrMu.Lock()
	defer b.mrMu.Unlock()
	b.mr.seq++
	return b.mr.seq
}

// mrPrefix is the key prefix of the MR entries of the peer whose default GID is gid.
func (c *Context) mrPrefix(gid [16]byte) string {
	return fmt.Sprintf("shift/%s/mr/%s/", c.opts.Job, hex.EncodeToString(gid[:]))
}

// parseMRKey is the rkey of key (under mrPrefix) when it is an entry of backup index idx.
func parseMRKey(rest string, idx int) (uint32, bool) {
	num, suffix, _ := strings.Cut(rest, "/")
	if suffix != "" {
		suffix = "/" + suffix
	}
	if suffix != backupSuffix(idx) {
		return 0, false
	}
	v, err := strconv.ParseUint(num, 10, 32)
	if err != nil || strconv.FormatUint(v, 10) != num {
		return 0, false
	}
	return uint32(v), true
}

// listPeer reads every MR entry of the peer gid for this device's index (kv.Lister) and
// replaces the cache's view of that peer with it: listed entries are stored (those that fail
// their checks as refusals), entries no longer listed are dropped. A store that cannot answer
// leaves the cache as it was. It reports false for a store that cannot list.
func (b *backupDev) listPeer(ctx context.Context, gid [16]byte) (bool, error) {
	l, ok := b.c.opts.KV.(kv.Lister)
	if !ok {
		return false, nil
	}
	seq := b.nextSeq()
	prefix := b.c.mrPrefix(gid)
	ents, err := l.List(ctx, prefix)
	b.mrMu.Lock()
	if b.mr.peers == nil {
		b.mr.peers = map[[16]byte]time.Time{}
	}
	b.mr.peers[gid] = b.c.now()
	b.mrMu.Unlock()
	if err != nil {
		return true, fmt.Errorf("failover: list the MR entries of %x: %w", gid, err)
	}
	seen := map[uint32]bool{}
	for _, ent := range ents {
		rkey, ok := parseMRKey(strings.TrimPrefix(ent.Key, prefix), b.idx)
		if !ok {
			continue
		}
		seen[rkey] = true
		e, err := parseMREntry(ent.Value, gid, rkey)
		b.storeRKey(rkeyKey{gid, rkey}, &mrRec{e: e, err: err, seq: b.nextSeq()})
	}
	b.rkeys.Range(func(key, v any) bool {
		k := key.(rkeyKey)
		if k.gid == gid && !seen[k.rkey] && v.(*mrRec).seq < seq {
			// Deleted by the peer (its MR deregistered), unless read since the listing began.
			b.dropRKey(k, v.(*mrRec))
		}
		return true
	})
	return true, nil
}

// fetchRKeys reads the entries of keys (Get, up to fetchParallel at once) within ctx (one KV
// timeout in all) and stores what it found: an entry, a refusal (ErrBadEntry), or, for a key
// the cache does not hold, why the read failed (kv.ErrNotFound, kv.ErrUnavailable). It runs
// with no lock of the data path held.
func (b *backupDev) fetchRKeys(ctx context.Context, keys []rkeyKey) {
	if len(keys) > 1 {
		// Concurrently: a round missing several keys waits for one round trip, not one each.
		var wg sync.WaitGroup
		for part := range slices.Chunk(keys, (len(keys)+fetchParallel-1)/fetchParallel) {
			wg.Go(func() { b.fetchRKeysSeq(ctx, part) })
		}
		wg.Wait()
		return
	}
	b.fetchRKeysSeq(ctx, keys)
}

// fetchParallel bounds the concurrent reads of fetchRKeys.
const fetchParallel = 16

func (b *backupDev) fetchRKeysSeq(ctx context.Context, keys []rkeyKey) {
	c := b.c
	for _, k := range keys {
		seq := b.nextSeq()
		v, err := c.opts.KV.Get(ctx, c.mrKeyN(b.idx, k.gid, k.rkey))
		if err != nil {
			err = fmt.Errorf("failover: read the MR entry of rkey %#x: %w", k.rkey, err)
			if old, ok := b.rkeys.Load(k); ok && old.(*mrRec).err == nil && !errors.Is(err, kv.ErrNotFound) {
				continue // the store is unreachable: keep what it said last
			}
			b.storeRKey(k, &mrRec{err: err, seq: seq})
			continue
		}
		e, err := parseMREntry(v, k.gid, k.rkey)
		b.storeRKey(k, &mrRec{e: e, err: err, seq: seq})
	}
}

// prefetchPeer is called by the shadow goroutine when a QP towards the peer gid connected:
// the peer's entries are listed now if this device has not listed them yet, and at the next
// pass otherwise (the new QP may be the first use of MRs registered since the last listing).
func (b *backupDev) prefetchPeer(ctx context.Context, gid [16]byte) {
	b.mrMu.Lock()
	_, known := b.mr.peers[gid]
	if known {
		if b.mr.due == nil {
			b.mr.due = map[[16]byte]bool{}
		}
		b.mr.due[gid] = true
	}
	b.mrMu.Unlock()
	if !known {
		if listed, _ := b.listPeer(ctx, gid); !listed {
			b.mrMu.Lock()
			if b.mr.peers == nil {
				b.mr.peers = map[[16]byte]time.Time{}
			}
			b.mr.peers[gid] = b.c.now()
			b.mrMu.Unlock()
		}
		return
	}
	b.kick()
}

// serviceMRs is the shadow goroutine's pass over the cache: the keys that missed are read,
// then the peers that are due are listed again. It returns how long until the next listing
// is due (0: none known).
func (b *backupDev) serviceMRs(ctx context.Context) time.Duration {
	every := time.Duration(b.c.mrRefresh.Load())
	now := b.c.now()
	b.mrMu.Lock()
	var want []rkeyKey
	for k := range b.mr.want {
		if v, ok := b.rkeys.Load(k); !ok || v.(*mrRec).err != nil {
			want = append(want, k)
		}
	}
	b.mr.want = nil
	var list [][16]byte
	next := time.Duration(0)
	for g, at := range b.mr.peers {
		in := every - now.Sub(at)
		if b.mr.due[g] || in <= 0 {
			list = append(list, g)
			in = every
		}
		if next == 0 || in < next {
			next = in
		}
	}
	b.mr.due = nil
	b.mrMu.Unlock()
	if len(want) == 0 && len(list) == 0 {
		return next
	}
	kctx, cancel := context.WithTimeout(ctx, b.c.opts.KVTimeout)
	defer cancel()
	if len(want) > 0 {
		b.fetchRKeys(kctx, want)
	}
	for _, g := range list {
		if listed, _ := b.listPeer(kctx, g); !listed {
			b.mrMu.Lock()
			b.mr.peers[g] = b.c.now() // not a Lister: only misses are read
			b.mrMu.Unlock()
		}
	}
	return next
}

// missingRKeys appends to miss the keys of the remote WRs of wrs that the cache of b cannot
// answer for (towards the peer gid).
func (b *backupDev) missingRKeys(gid [16]byte, wrs []verbs.SendWR, miss []rkeyKey) []rkeyKey {
	return missingRKeysBy(gid, wrs, miss, b.cachedRKey)
}

// missingRKeysBy is missingRKeys with known saying what the cache answers for.
func missingRKeysBy(gid [16]byte, wrs []verbs.SendWR, miss []rkeyKey, known func(rkeyKey) bool) []rkeyKey {
	for i := range wrs {
		switch wrs[i].Opcode {
		case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm, verbs.WRRDMARead,
			verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAdd:
			k := rkeyKey{gid, wrs[i].RKey}
			if !known(k) && !containsKey(miss, k) {
				miss = append(miss, k)
			}
		}
	}
	return miss
}

func containsKey(ks []rkeyKey, k rkeyKey) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// fetchMissingRKeysLocked runs in a fallback round (roundLocked) before the round changes
// anything, with the QP off the fast path: when a WR the round will rewrite (in the default
// ring, in the backup log of a chained round, posted during the handshake) names a remote
// key the cache cannot answer for, it releases q.mu, reads those keys (one KV timeout in
// all), takes q.mu again and reports released. The caller then starts the round over on the
// state found now (again), or drops it (!again: the QP was destroyed, or moved to another
// backup set, whose own round took over). A round started over does not release q.mu again:
// a key still missing fails it closed. good reports that every remote key of the default
// ring was in the cache with a good entry (missingDefRKeysLocked).
func (q *QP) fetchMissingRKeysLocked() (released, again, good bool) {
	if !q.slow {
		return false, false, false
	}
	bs := q.cs()
	miss, good := q.missingDefRKeysLocked(bs.dev, nil) // good: none missing, none refused
	if q.mach.repostState() == RepostChain {
		q.fifoMu.Lock()
		for i := range q.bkLog {
			miss = bs.dev.missingRKeys(q.remote.GID, []verbs.SendWR{q.bkLog[i].wr}, miss)
		}
		q.fifoMu.Unlock()
	}
	miss = bs.dev.missingRKeys(q.remote.GID, q.pendingWRs(), miss)
	if len(miss) == 0 {
		return false, false, good
	}
	cur := q.cur.Load()
	q.mu.Unlock()
	q.c.fetchFor(bs.dev, miss)
	q.mu.Lock()
	if q.destroyed || q.cur.Load() != cur {
		return true, false, false
	}
	return true, true, false
}

// missingDefRKeysLocked appends to miss the remote keys the cache of dev cannot answer for,
// named by the default ring's WQEs that are still SHIFT's to repost (repostableLocked, as
// defSendsLocked). A WQE the round decoded already (the reply's round, after prepareLocked's
// decode) gives its key from there (cachedDecodeLocked); of the others only the remote-address
// segment is read: decoding every WQE whole into a WR took 26–31 µs p50 of a round's own
// share with a full ring of 64 WRITEs (BenchmarkFallbackLatency, a temporary trace), before
// the round had changed anything; the retransmission check decodes them once the default QP
// is stopped and drained (checkSendsLocked). Decoding them whole here and reading the
// decodes there was slower still, with the cheaper decode of 2026-11-30: 38–40 µs p50 here
// and 5 there, against 15 and 20–21 (a temporary trace, 64 WRITEs; the first pass over the
// ring pays its cold lines).
//
// good reports that every key named was in the cache with an entry that passed its checks,
// none missing and none refused (the retransmission check may then wait until after the
// notification: checkOpsLocked).
func (q *QP) missingDefRKeysLocked(dev *backupDev, miss []rkeyKey) (_ []rkeyKey, good bool) {
	if q.destroyed {
		return miss, false // its rings are gone
	}
	q.defOutstandingLocked()
	if q.keysStillCheckedLocked(dev) {
		return miss, true // every key of these WQEs mapped, and none changed since
	}
	good = true
	buf := q.wqeDec.buf[:]
	var last rkeyKey
	checked := false
	for _, w := range q.outSends {
		if !q.repostableLocked(w) {
			continue
		}
		if raddr, _, _ := w.Opcode.Segments(); !raddr {
			continue
		}
		var rkey uint32
		if d, ok := q.cachedDecodeLocked(w.Pos); ok {
			rkey = d.wr.RKey
		} else {
			n, err := q.def.ReadSendWQE(w.Pos, buf)
			if err != nil || n < mlx5.CtrlSegSize+mlx5.RaddrSegSize {
				continue // prepareLocked's decode fails the round on it
			}
			r, err := mlx5.DecodeRaddrSeg(buf[mlx5.CtrlSegSize:n])
			if err != nil {
				continue
			}
			rkey = r.RKey
		}
		k := rkeyKey{q.remote.GID, rkey}
		if checked && k == last {
			continue // WQEs in a row mostly name one MR: its key is looked up once
		}
		last, checked = k, true
		switch cached, ok := dev.rkeyCached(k); {
		case !cached:
			good = false
			if !containsKey(miss, k) {
				miss = append(miss, k)
			}
		case !ok:
			good = false
		}
	}
	return miss, good
}

// rkeysFirstLocked is the check a fallback round (roundLocked) makes before it changes
// anything: with every remote key it will rewrite in the cache it reports done false and the
// round goes on; otherwise q.mu was released while the missing keys were read, the round was
// started over on the state found then (or dropped, see fetchMissingRKeysLocked), and it
// reports done. Chained rounds are not started over (chainLocked changed the QP before): a
// key the cache misses there fails the round closed (the background read fills the cache for
// the next one). good, when it reports false: the default ring's remote keys were all found
// good, so the initiator may check its WQEs' keys after its notification (checkOpsLocked);
// false for a round that looked nothing up (chained, or started over).
func (q *QP) rkeysFirstLocked(peer ctlMsg, fromPeer, chain bool) (done, good bool) {
	if chain || q.mach.rkeysState() == RKeysRetried {
		return false, false
	}
	q.markSlowLocked() // the default ring is read: no fast-path post may write it meanwhile
	released, again, good := q.fetchMissingRKeysLocked()
	if !released {
		return false, good
	}
	if again {
		_ = q.mach.event(wordRKeys, EvRKeysRetry)
		q.roundLocked(peer, fromPeer, false)
		_ = q.mach.event(wordRKeys, EvRKeysDone)
	}
	return true, false
}

// fetchFor reads keys for a round or a post that found them missing, and counts the wait.
func (c *Context) fetchFor(b *backupDev, keys []rkeyKey) {
	t := c.now()
	ctx, cancel := c.kvCtx()
	b.fetchRKeys(ctx, keys)
	cancel()
	c.kvWaits.Add(1)
	c.kvWaitNS.Add(int64(c.now().Sub(t)))
}

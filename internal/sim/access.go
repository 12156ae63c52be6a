package sim

import (
	"math/rand/v2"

	"github.com/shift-rdma/shift/provider/verbs"
)

// Restricted remote access. Applications give their QPs only the remote access their peer
// needs: perftest's ib_read_bw RDMA READ alone, ibv_rc_pingpong none, its write tests RDMA
// WRITE. SHIFT's own operations on a default QP (the probe that tells a path came back is a
// zero-length RDMA WRITE) and on the backup QPs must work whatever the application allowed,
// and the application's must keep working as it allowed them. In a quarter of the failover
// runs (a stream of the seed's own, so that the others run as before) every QP is connected
// with one of the access sets below, and the workload posts only what its peer allows
// (permitted): WRITE and WRITE_WITH_IMM become SENDs where the peer takes no WRITE, READs
// and atomics SENDs where it takes neither. A probe the peer refuses would fail every time,
// and a recovery run would never end (ib_read_bw did not come back before
// failover.resetAccess).

// accessStream names the stream ("ACCESS").
const accessStream = 0x414343455353

// accessSets are the remote access a restricted run draws from. AccessLocalWrite stands for
// ibv_rc_pingpong's 0: a zero ConnectAttr.Access means every access (verbs.ConnectAttr.Defaults),
// and a QP's access flags have no local bit that matters.
var accessSets = [...]verbs.Access{
	verbs.AccessRemoteRead,
	verbs.AccessLocalWrite,
	verbs.AccessRemoteWrite,
	verbs.AccessRemoteRead | verbs.AccessRemoteAtomic,
}

// drawAccess returns the QPs' remote access for a run, or 0 (every access).
func drawAccess(seed uint64, failover bool) verbs.Access {
	if !failover {
		return 0
	}
	r := rand.New(rand.NewPCG(seed, accessStream))
	if r.IntN(4) != 0 {
		return 0
	}
	return accessSets[r.IntN(len(accessSets))]
}

// permitted is op as a run with remote access a (0: every access) posts it.
func permitted(a verbs.Access, op verbs.WROpcode) verbs.WROpcode {
	if a == 0 {
		return op
	}
	switch op {
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
		if a&verbs.AccessRemoteWrite == 0 {
			return verbs.WRSend
		}
	case verbs.WRRDMARead:
		if a&verbs.AccessRemoteRead == 0 {
			return verbs.WRSend
		}
	case verbs.WRAtomicFetchAdd, verbs.WRAtomicCmpAndSwp:
		if a&verbs.AccessRemoteAtomic == 0 {
			return verbs.WRSend
		}
	}
	return op
}

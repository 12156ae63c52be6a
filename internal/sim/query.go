package sim

import (
	"math/rand/v2"

	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/provider/verbs"
)

// Queries. An application may call ibv_query_qp at any time (to read its QP's state after an
// error, or its attributes). Over the failover layer the answer must be the application's
// view (failover.QP.Query): while SHIFT keeps the QP running, the state the application moved
// it to (RTS, or RTR for a receive-only QP), never the default QP's ERR or its reconnecting
// RESET, INIT or RTR; and the runs must keep every other invariant with the queries between
// the steps. In half the failover runs (a stream of the seed's own, so the others run as
// before) the application queries a QP every queryEvery steps on average.

// queryStream names the stream ("QUERY").
const queryStream = 0x5155455259

// queryEvery is the mean number of steps between two queries in a querying run.
const queryEvery = 40

// drawQueries returns the stream a querying run draws its queries from, or nil.
func drawQueries(seed uint64, fo bool) *rand.Rand {
	r := rand.New(rand.NewPCG(seed, queryStream))
	if !fo || r.IntN(2) != 0 {
		return nil
	}
	return r
}

// queryStep may query one QP, as the application would.
func (s *runner) queryStep() error {
	if s.qr == nil || s.qr.IntN(queryEvery) != 0 {
		return nil
	}
	e := s.w.ends[s.qr.IntN(len(s.w.ends))]
	if s.paused(e.host) || e.gone {
		return nil
	}
	a, err := e.qp.Query(verbs.QPAttrState)
	if err != nil {
		return s.violation("query_qp on host %d pair %d: %v", e.host, e.pair, err)
	}
	s.res.Queries++
	s.record(evQuery, uint64(e.host)<<8|uint64(e.pair), uint64(a.State), 0, 0)
	q := e.qp.(*failover.QP)
	if q.SendState() == failover.SendFailed || q.RecvState() == failover.RecvFailed {
		return nil
	}
	want := verbs.QPStateRTS
	if e.recvOnly {
		want = verbs.QPStateRTR
	}
	if a.State != want {
		return s.violation("query_qp on host %d pair %d: state %v, want %v (the QP runs: %v/%v)", e.host, e.pair, a.State, want, q.SendState(), q.RecvState())
	}
	return nil
}

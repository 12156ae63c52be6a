package sim

import "time"

// chainFirst is the chained failure's first long down, on endpoint def. A link already down
// (a short down drawn before it) would make down skip it, and with it the whole chain: no
// fallback would come and the workload would post until the step budget ran out (seed 1943 of
// recovery with two backups). It tries again once that down is over.
func (s *runner) chainFirst(def int) func() {
	return func() {
		if s.down(def, s.longDown()) {
			s.chainLeft--
			return
		}
		s.w.clk.AfterFunc(time.Millisecond, s.chainFirst(def))
	}
}

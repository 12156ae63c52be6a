package fence

import "strconv"

// State is where a Fence stands. Reads are atomic; transitions happen under the fence's lock.
type State uint32

// Fence states, in the order a successful fence passes through them.
const (
	// Idle: no fence WR yet; posts are refused.
	Idle State = iota
	// Withholding: the fence WR is outstanding on the old QP; the notification (if any) and
	// every posted WR are written on the new QP with the doorbell withheld.
	Withholding
	// Notifying: the fence WR completed; the doorbell was rung for the notification alone,
	// whose completion is awaited. Posts are still withheld.
	Notifying
	// Done: everything withheld was rung; posts go to the new QP with their doorbell.
	Done
	// Failed: the fence WR or the notification failed, or the caller aborted; the withheld
	// WQEs are left unrung (see Fence.Withheld) and posts are refused.
	Failed
)

var stateNames = [...]string{Idle: "idle", Withholding: "withholding", Notifying: "notifying", Done: "done", Failed: "failed"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// pending reports whether s still holds withheld WQEs waiting for a completion.
func (s State) pending() bool { return s == Withholding || s == Notifying }

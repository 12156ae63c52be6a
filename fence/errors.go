package fence

import "errors"

// Sentinel errors. Errors returned by this package wrap one of these (test with errors.Is);
// errors from the provider (for example verbs.ErrSQFull or verbs.ErrQPState) are
// wrapped as they come.
var (
	// ErrState: the call is not allowed in the fence's current state.
	ErrState = errors.New("fence: operation not allowed in this state")
	// ErrInvalidArgument: a QP or WR reference the fence cannot use.
	ErrInvalidArgument = errors.New("fence: invalid argument")
	// ErrFenceWR: the fence WR (or an earlier WR of the old QP) completed in error.
	ErrFenceWR = errors.New("fence: fence WR failed")
	// ErrNotification: the notification WR on the new QP completed in error.
	ErrNotification = errors.New("fence: notification WR failed")
	// ErrAborted: the caller aborted the fence.
	ErrAborted = errors.New("fence: aborted")
	// ErrFailed: the fence has failed; posts must go elsewhere.
	ErrFailed = errors.New("fence: fence failed")
)

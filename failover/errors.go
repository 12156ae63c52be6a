package failover

import "errors"

var (
	// ErrNoBackup: no backup device could be chosen for the default device.
	ErrNoBackup = errors.New("failover: no backup device")
	// ErrNotSafe: the fallback was refused because an outstanding WR is an atomic or carries
	// SendIneligible (retransmitting it could apply it twice).
	ErrNotSafe = errors.New("failover: outstanding work request is not retransmission-safe")
	// ErrBackupNotReady: the QP's shadow on the backup device was not connected when the
	// fallback needed it (peer attributes missing from the KV store, or not replayed yet).
	ErrBackupNotReady = errors.New("failover: backup QP not ready")
	// ErrFailed: the QP failed and could not fall back; posts are refused as on a QP in ERR.
	ErrFailed = errors.New("failover: QP failed")
	// ErrBadConfig: an option or environment variable could not be parsed.
	ErrBadConfig = errors.New("failover: bad configuration")
	// ErrBadEntry: a KV entry is malformed, out of range or names another QP or MR than the
	// one it was looked up for (kventry.go); it is never used.
	ErrBadEntry = errors.New("failover: bad KV entry")
)

// errNeedsReset: the default QP is in a state (ERR, SQE, RESET) from which only a reset
// round reconnects it.
var errNeedsReset = errors.New("default QP needs a reset round")

// errAppError stops a fallback whose drain found the application's own error.
var errAppError = errors.New("the default QP failed by the application's error")

// ErrNoLinkWatch: the default device's link cannot be watched (an emulated device, a port
// without a netdev); Context.LinkWatch says why the context runs without the watcher.
var ErrNoLinkWatch = errors.New("no link watcher")

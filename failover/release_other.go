//go:build !amd64

package failover

// plainRelease: other architectures reorder a plain store with earlier accesses; the
// poster's exit is an atomic (release) store there.
const plainRelease = false

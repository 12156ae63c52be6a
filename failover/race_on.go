//go:build race

package failover

// raceBuild: the race detector sees only atomics, so the post gates use them on both sides.
const raceBuild = true

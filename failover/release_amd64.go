package failover

// plainRelease: on amd64 (TSO) a plain store is not reordered before earlier loads or
// stores, so it publishes a poster's writes as a release store would.
const plainRelease = true

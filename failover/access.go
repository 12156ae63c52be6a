package failover

import "github.com/shift-rdma/shift/provider/verbs"

// resetAccess is the remote access of a default QP SHIFT has reset: the application's, plus
// RDMA WRITE for the peer's probes. A probe is a zero-length RDMA WRITE (paper §4.3.3, "an
// empty write packet"), and a responder whose QP does not allow RDMA WRITE answers it with
// a NAK (Invalid Request, as rdma_rxe's check_op_valid does whatever the length), failing
// the probe and starting a reset round, for good: perftest's ib_read_bw enables only RDMA
// READ on its QPs and never came back to the default path (the plugin's
// TestFailoverUnderTools/ib_read_bw: ten probes, ten failures). A zero-length WRITE touches
// no memory and its rkey is not checked; a longer one still needs a memory region registered
// for remote write, so the addition opens what the application's memory regions already
// allow to the peer of this QP, which runs SHIFT's other half. The backup QPs get the same
// when they are connected (connectBackup), where they had every remote access. The reset used
// the application's flags before, and verbs.ConnectAttr read an application's 0
// (ibv_rc_pingpong's, no remote access at all) as "unset": every remote access
// (docs/SECURITY.md).
func resetAccess(app verbs.Access) verbs.Access { return app | verbs.AccessRemoteWrite }

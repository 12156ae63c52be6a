package provider

import "github.com/shift-rdma/shift/provider/verbs"

// The provider's objects implement the verbs contract.
var (
	_ verbs.Context     = (*Context)(nil)
	_ verbs.PD          = (*PD)(nil)
	_ verbs.MR          = (*MR)(nil)
	_ verbs.CQ          = (*CQ)(nil)
	_ verbs.QP          = (*QP)(nil)
	_ verbs.CompChannel = (*CompChannel)(nil)
)

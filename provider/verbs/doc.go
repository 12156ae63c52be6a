// Package verbs is the verbs contract of SHIFT-Go: the value types of the verbs API (work
// requests, completions, QP attributes and capabilities, device and port attributes) and the
// interfaces every implementation offers (Context, PD, MR, CQ, QP, CompChannel).
//
// Two packages implement it: provider, the plain mlx5 provider, and failover, which wraps
// provider objects with SHIFT's transparent failover. Everything above them (the libibverbs
// plugin, shiftctl, the demo, applications) is written against this package, so that plain and
// SHIFT mode are one code path that differs only in which Context was opened.
//
// The types mirror libibverbs' (infiniband/verbs.h): enum values are the C values, each type
// names the struct or enum it mirrors, and a C provider can convert between them field by
// field. The package depends on nothing but the standard library and x/sys/unix: it sits
// below provider and failover and above none of them.
package verbs

// Package fence is SHIFT's WR execution fence (paper §3.2 C#3, §4.3.3): the mechanism that
// moves a stream of send work requests from one RC queue pair to another without ever
// executing a later WR before an earlier one. The RNIC executes WRs asynchronously, so
// software cannot know how far an old queue has got; the only trustworthy signal is the
// completion of a signaled WR. The fence therefore takes a signaled WR already posted on the
// old QP (the fence WR), writes every following WR into the new QP's send ring with the
// doorbell withheld — the WQEs exist but the NIC cannot see them — and rings the new QP's
// doorbell only once the fence WR's completion has been handed in. An optional notification
// WR (SHIFT's WRITE_WITH_IMM, which makes the receiver repost its receives) sits first on the
// new QP and is released alone; the withheld WRs follow only after its own completion.
//
// The package sits on top of package provider's ring operations (PostSendNoDoorbell,
// RingSendDoorbell, OutstandingSends) and below the failover state machine, which decides
// when to fence; it knows nothing of probes, links or the state machine. It runs no
// goroutine: the caller drives it from its poll loop by handing in completions (HandleWC).
// On a failed fence WR or notification the withheld WQEs stay unrung and are listed with
// their ring positions and wr_ids (Withheld), for the caller to copy elsewhere.
//
// Use: post the fence WR on the old QP (the application's next signaled WR, or PostSignaled
// with a zero-length WRITE), call Begin before polling its completion, send every later WR
// through Post, and hand every completion polled from either QP to HandleWC in poll order
// until State is Done or Failed. On Failed, take Withheld before resetting the new QP; Abort
// is the caller's way to give up (a link went down for good). Reset readies the fence for
// the next switch. The old QP's WRs must all be rung before the fence WR; WRs posted behind
// the fence on the old QP are not ordered by it.
package fence

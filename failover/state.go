package failover

import "fmt"

// SendState is the send side of a QP's state machine (docs/FAILOVER.md): Default →
// Handshake → Fallback → WaitSignaled → WaitDrained → Default, plus Failed when the QP
// cannot fall back. Handshake is the part of the fallback in which the QP's receives are on
// the backup and its old sends wait for the peer's receive counter.
type SendState uint32

// Send states.
const (
	SendDefault SendState = iota
	SendHandshake
	SendFallback
	SendWaitSignaled
	SendWaitDrained
	SendFailed
	numSendStates
)

var sendStateNames = [...]string{"Default", "Handshake", "Fallback", "WaitSignaled", "WaitDrained", "Failed"}

func (s SendState) String() string {
	if s < numSendStates {
		return sendStateNames[s]
	}
	return fmt.Sprintf("SendState(%d)", uint32(s))
}

// RecvState is the receive side of a QP's state machine: Default ⇄ Fallback, plus Failed.
type RecvState uint32

// Receive states.
const (
	RecvDefault RecvState = iota
	RecvFallback
	RecvFailed
	numRecvStates
)

var recvStateNames = [...]string{"Default", "Fallback", "Failed"}

func (s RecvState) String() string {
	if s < numRecvStates {
		return recvStateNames[s]
	}
	return fmt.Sprintf("RecvState(%d)", uint32(s))
}

// Event is what moves a state machine.
type Event uint8

// Events.
const (
	EvFailure   Event = iota // error completion or failed post on the default QP, or a peer's notification
	EvPeerCount              // the peer's receive counter arrived: old sends reposted
	EvRecvMoved              // outstanding receives reposted on the backup QP
	EvFatal                  // the fallback was refused or the backup failed
	EvProbeOK                // recovery (issue 6): the default path works again
	EvFenceWR                // recovery: the fence WR was posted
	EvDrained                // recovery: the fence WR completed
	EvChain                  // the backup in use failed too: the sends on it move to the next one
	// Round events (roundTable).
	EvNotified        // our notification of a round is out
	EvNothingToRepost // the round has nothing of ours to repost: its reply resets the default QP
	EvRoundOver       // the peer's notification came, or the round was abandoned (refused, restarted on the next backup)
	// Pin events (pinTable).
	EvSwitchBackup  // SwitchToBackup
	EvSwitchDefault // SwitchToDefault
	EvPeerPinned    // the peer's notification carried its pin: it switched on purpose
	EvPeerBack      // the pinned peer's recovery notification
	// Events of the words that live for a probe loop or a round (table.go).
	EvProbeStart  // a probe loop of the QP starts (goroutine or clock timer)
	EvProbeStop   // it ends, or is told to
	EvChainSends  // the round under way moves the sends of a backup that failed
	EvRepostTaken // the round's repost took them
	EvRKeysRetry  // the round starts over once the peer's MR entries were read (rkcache.go)
	EvRKeysDone   // the round that started over is done with them
	EvHold        // a round waits with q.mu released: the application's posts are held
	EvRelease     // the hold ends (flushHeld)
	EvNeverSent   // a receive-only QP's receive side came back; it never sent (recvonly.go)
	numEvents
)

var eventNames = [...]string{"Failure", "PeerCount", "RecvMoved", "Fatal", "ProbeOK", "FenceWR", "Drained", "Chain",
	"Notified", "NothingToRepost", "RoundOver", "SwitchBackup", "SwitchDefault", "PeerPinned", "PeerBack",
	"ProbeStart", "ProbeStop", "ChainSends", "RepostTaken", "RKeysRetry", "RKeysDone", "Hold", "Release", "NeverSent"}

func (e Event) String() string {
	if e < numEvents {
		return eventNames[e]
	}
	return fmt.Sprintf("Event(%d)", uint8(e))
}

// RoundState is the QP's part in a reset round (docs/FAILOVER.md "Reset rounds"): none, or
// our notification is out and the peer's has not come. The peer's notification then reposts
// our sends (send state Handshake), or, in a round with nothing of ours to repost
// (AwaitReset), resets the default QP. Until it comes the QP does not probe: the peer's
// responder may still hold the PSNs a new probe would reuse.
type RoundState uint32

// Round states.
const (
	RoundIdle RoundState = iota
	RoundAwait
	RoundAwaitReset
	numRoundStates
)

var roundStateNames = [...]string{"Idle", "Await", "AwaitReset"}

func (s RoundState) String() string {
	if s < numRoundStates {
		return roundStateNames[s]
	}
	return fmt.Sprintf("RoundState(%d)", uint32(s))
}

// PinState says who moved the QP to the backup on purpose (paper §4.4): this side
// (SwitchToBackup: it stays there until SwitchToDefault), the peer (its notification said so:
// no probing until its recovery notification), or both. A pinned QP does not probe.
type PinState uint32

// Pin states.
const (
	PinNone PinState = iota
	PinLocal
	PinPeer
	PinBoth
	numPinStates
)

// local reports a pin of this side's (SwitchToBackup), peer one of the peer's.
func (s PinState) local() bool { return s == PinLocal || s == PinBoth }
func (s PinState) peer() bool  { return s == PinPeer || s == PinBoth }

var pinStateNames = [...]string{"None", "Local", "Peer", "Both"}

func (s PinState) String() string {
	if s < numPinStates {
		return pinStateNames[s]
	}
	return fmt.Sprintf("PinState(%d)", uint32(s))
}

// SendTransitions returns how many times the send side went from one state to another.
func (m *machine) SendTransitions(from, to SendState) uint64 {
	if from >= numSendStates || to >= numSendStates {
		return 0
	}
	return m.sendCounts[from][to].Load()
}

// RecvTransitions returns how many times the receive side went from one state to another.
func (m *machine) RecvTransitions(from, to RecvState) uint64 {
	if from >= numRecvStates || to >= numRecvStates {
		return 0
	}
	return m.recvCounts[from][to].Load()
}

// SendTransitions returns how many times q's send side went from one state to another (for
// shiftctl status).
func (q *QP) SendTransitions(from, to SendState) uint64 { return q.mach.SendTransitions(from, to) }

// RecvTransitions returns how many times q's receive side went from one state to another.
func (q *QP) RecvTransitions(from, to RecvState) uint64 { return q.mach.RecvTransitions(from, to) }

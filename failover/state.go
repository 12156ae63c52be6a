package failover

import (
	"fmt"
	"sync/atomic"
)

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
	numEvents
)

var eventNames = [...]string{"Failure", "PeerCount", "RecvMoved", "Fatal", "ProbeOK", "FenceWR", "Drained", "Chain",
	"Notified", "NothingToRepost", "RoundOver", "SwitchBackup", "SwitchDefault", "PeerPinned", "PeerBack"}

func (e Event) String() string {
	if e < numEvents {
		return eventNames[e]
	}
	return fmt.Sprintf("Event(%d)", uint8(e))
}

// sendTable is the only place send transitions are defined: a missing entry is an illegal
// transition (a bug).
var sendTable = map[[2]uint32]SendState{
	{uint32(SendDefault), uint32(EvFailure)}:      SendHandshake,
	{uint32(SendHandshake), uint32(EvPeerCount)}:  SendFallback,
	{uint32(SendDefault), uint32(EvFatal)}:        SendFailed,
	{uint32(SendHandshake), uint32(EvFatal)}:      SendFailed,
	{uint32(SendFallback), uint32(EvFatal)}:       SendFailed,
	{uint32(SendFallback), uint32(EvProbeOK)}:     SendWaitSignaled,
	{uint32(SendWaitSignaled), uint32(EvFenceWR)}: SendWaitDrained,
	{uint32(SendWaitDrained), uint32(EvDrained)}:  SendDefault,
	{uint32(SendWaitSignaled), uint32(EvFailure)}: SendFallback, // nothing of ours on the default QP yet
	{uint32(SendWaitDrained), uint32(EvFailure)}:  SendHandshake,
	{uint32(SendWaitSignaled), uint32(EvFatal)}:   SendFailed,
	{uint32(SendWaitDrained), uint32(EvFatal)}:    SendFailed,
	// A chained failure (bkset.go): a round onto the next backup.
	{uint32(SendDefault), uint32(EvChain)}:      SendHandshake,
	{uint32(SendFallback), uint32(EvChain)}:     SendHandshake,
	{uint32(SendWaitSignaled), uint32(EvChain)}: SendHandshake,
	{uint32(SendWaitDrained), uint32(EvChain)}:  SendHandshake,
}

var recvTable = map[[2]uint32]RecvState{
	{uint32(RecvDefault), uint32(EvRecvMoved)}: RecvFallback,
	{uint32(RecvFallback), uint32(EvDrained)}:  RecvDefault,
	{uint32(RecvDefault), uint32(EvFatal)}:     RecvFailed,
	{uint32(RecvFallback), uint32(EvFatal)}:    RecvFailed,
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

// roundTable and pinTable define the other two state words' transitions, as sendTable does;
// every event is defined in every state where the code may raise it (an entry to the same
// state where it changes nothing).
var roundTable = map[[2]uint32]RoundState{
	{uint32(RoundIdle), uint32(EvNotified)}:         RoundAwait,
	{uint32(RoundAwait), uint32(EvNothingToRepost)}: RoundAwaitReset,
	{uint32(RoundIdle), uint32(EvRoundOver)}:        RoundIdle,
	{uint32(RoundAwait), uint32(EvRoundOver)}:       RoundIdle,
	{uint32(RoundAwaitReset), uint32(EvRoundOver)}:  RoundIdle,
}

var pinTable = map[[2]uint32]PinState{
	{uint32(PinNone), uint32(EvSwitchBackup)}:   PinLocal,
	{uint32(PinPeer), uint32(EvSwitchBackup)}:   PinBoth,
	{uint32(PinLocal), uint32(EvSwitchBackup)}:  PinLocal,
	{uint32(PinBoth), uint32(EvSwitchBackup)}:   PinBoth,
	{uint32(PinLocal), uint32(EvSwitchDefault)}: PinNone,
	{uint32(PinBoth), uint32(EvSwitchDefault)}:  PinPeer,
	{uint32(PinNone), uint32(EvSwitchDefault)}:  PinNone,
	{uint32(PinPeer), uint32(EvSwitchDefault)}:  PinPeer,
	{uint32(PinNone), uint32(EvPeerPinned)}:     PinPeer,
	{uint32(PinLocal), uint32(EvPeerPinned)}:    PinBoth,
	{uint32(PinPeer), uint32(EvPeerPinned)}:     PinPeer,
	{uint32(PinBoth), uint32(EvPeerPinned)}:     PinBoth,
	{uint32(PinPeer), uint32(EvPeerBack)}:       PinNone,
	{uint32(PinBoth), uint32(EvPeerBack)}:       PinLocal,
	{uint32(PinNone), uint32(EvPeerBack)}:       PinNone,
	{uint32(PinLocal), uint32(EvPeerBack)}:      PinLocal,
}

// machine holds the state words of a QP and the transition counters. Reads are atomic
// loads; transitions are made with the QP's mutex held.
type machine struct {
	send, recv  atomic.Uint32
	round, pin  atomic.Uint32
	sendCounts  [numSendStates][numSendStates]atomic.Uint64
	recvCounts  [numRecvStates][numRecvStates]atomic.Uint64
	transitions *atomic.Uint64 // context-wide counter
	track       eventTrack     // last event, time on the backup (status.go)
}

func (m *machine) sendState() SendState   { return SendState(m.send.Load()) }
func (m *machine) recvState() RecvState   { return RecvState(m.recv.Load()) }
func (m *machine) roundState() RoundState { return RoundState(m.round.Load()) }
func (m *machine) pinState() PinState     { return PinState(m.pin.Load()) }

// roundEvent applies ev to the round word; the caller holds the QP mutex. An event the
// table does not define leaves the word as it is and is an error (a bug), as in sendEvent.
func (m *machine) roundEvent(ev Event) error { return applyTable(&m.round, roundTable, ev, "round") }

// pinEvent applies ev to the pin word; the caller holds the QP mutex.
func (m *machine) pinEvent(ev Event) error { return applyTable(&m.pin, pinTable, ev, "pin") }

func applyTable[S interface {
	~uint32
	String() string
}](w *atomic.Uint32, table map[[2]uint32]S, ev Event, what string) error {
	from := w.Load()
	to, ok := table[[2]uint32{from, uint32(ev)}]
	if !ok {
		return fmt.Errorf("failover: illegal %s transition %v on %v", what, S(from), ev)
	}
	w.Store(uint32(to))
	return nil
}

// sendEvent applies ev to the send side; the caller holds the QP mutex.
func (m *machine) sendEvent(ev Event) (SendState, error) {
	from := m.send.Load()
	to, ok := sendTable[[2]uint32{from, uint32(ev)}]
	if !ok {
		return SendState(from), fmt.Errorf("failover: illegal send transition %v on %v", SendState(from), ev)
	}
	m.send.Store(uint32(to))
	m.track.event(ev, SendState(from), to)
	m.sendCounts[from][to].Add(1)
	if m.transitions != nil {
		m.transitions.Add(1)
	}
	return to, nil
}

// recvEvent applies ev to the receive side; the caller holds the QP mutex.
func (m *machine) recvEvent(ev Event) (RecvState, error) {
	from := m.recv.Load()
	to, ok := recvTable[[2]uint32{from, uint32(ev)}]
	if !ok {
		return RecvState(from), fmt.Errorf("failover: illegal receive transition %v on %v", RecvState(from), ev)
	}
	m.recv.Store(uint32(to))
	m.track.event(ev, m.sendState(), m.sendState())
	m.recvCounts[from][to].Add(1)
	if m.transitions != nil {
		m.transitions.Add(1)
	}
	return to, nil
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

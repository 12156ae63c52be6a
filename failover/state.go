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
	numEvents
)

var eventNames = [...]string{"Failure", "PeerCount", "RecvMoved", "Fatal", "ProbeOK", "FenceWR", "Drained", "Chain"}

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

// machine holds both state words of a QP and the transition counters. Reads are atomic
// loads; transitions are made with the QP's mutex held.
type machine struct {
	send, recv  atomic.Uint32
	sendCounts  [numSendStates][numSendStates]atomic.Uint64
	recvCounts  [numRecvStates][numRecvStates]atomic.Uint64
	transitions *atomic.Uint64 // context-wide counter
	track       eventTrack     // last event, time on the backup (status.go)
}

func (m *machine) sendState() SendState { return SendState(m.send.Load()) }
func (m *machine) recvState() RecvState { return RecvState(m.recv.Load()) }

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

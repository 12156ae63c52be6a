package failover

import (
	"fmt"
	"sync/atomic"
)

// The QP's state machine in one table (issue 12 §5; docs/FAILOVER.md "Per-QP state"). A QP's
// state is a few words, each an atomic the data path and the status readers load without a
// lock; every transition of every word is a row of qpTable, applied with the QP's mutex held
// (on the engine, engine.go). An event a word's current state has no row for leaves the word
// as it is and is an error: a bug. The words:
//
//   - send, receive: the two directions (SendState, RecvState);
//   - round: our part in a reset round (RoundState);
//   - pin: who moved the QP to the backup on purpose (PinState);
//   - probe: whether a probe loop of the QP runs (ProbeState);
//   - repost: whether the round under way moves the sends of a backup that failed
//     (RepostState);
//   - rkeys: whether the round under way was started over once the peer's MR entries were read
//     (RKeysState);
//   - hold: whether the application's slow-path posts are held while a round waits with the
//     QP's mutex released (HoldState, roundwait.go).
//
// The last four were booleans beside the table (probing, chainRepost, rkRetry, held); each
// lives for a probe loop or a round, and each is now a word with its rows here. Beside the
// words the QP keeps facts, not states: what the peer's last notification said of it
// (peerRecvOnly) and what ours said (toldRecvOnly, recvonly.go), its queues and counters.

// word names one of a QP's state words.
type word uint8

const (
	wordSend word = iota
	wordRecv
	wordRound
	wordPin
	wordProbe
	wordRepost
	wordRKeys
	wordHold
	numWords
)

var wordNames = [...]string{"send", "receive", "round", "pin", "probe", "repost", "rkeys", "hold"}

// ProbeState says whether a probe loop of the QP runs (recover.go, probe_step.go).
type ProbeState uint32

// Probe states.
const (
	ProbeIdle ProbeState = iota
	ProbeRunning
)

// RepostState says whether the round under way reposts the sends of a backup that failed
// before those of the default ring (repostCandidatesLocked).
type RepostState uint32

// Repost states.
const (
	RepostOwn RepostState = iota
	RepostChain
)

// RKeysState says whether the round under way was started over once the peer's MR entries
// were read (rkeysFirstLocked): it is not started over again.
type RKeysState uint32

// RKeys states.
const (
	RKeysFirst RKeysState = iota
	RKeysRetried
)

// HoldState says whether the application's slow-path posts are held (roundwait.go).
type HoldState uint32

// Hold states.
const (
	HoldNone HoldState = iota
	HoldPosts
)

// stateName is state s of word w, by name.
func stateName(w word, s uint32) string {
	switch w {
	case wordSend:
		return SendState(s).String()
	case wordRecv:
		return RecvState(s).String()
	case wordRound:
		return RoundState(s).String()
	case wordPin:
		return PinState(s).String()
	}
	if names, ok := flagStateNames[w]; ok && s < 2 {
		return names[s]
	}
	return fmt.Sprintf("%s state %d", wordNames[w], s)
}

var flagStateNames = map[word][2]string{wordProbe: {"Idle", "Running"}, wordRepost: {"Own", "Chain"},
	wordRKeys: {"First", "Retried"}, wordHold: {"None", "Posts"}}

// row is one transition: word w in state from moves to state to on event ev.
type row struct {
	w        word
	from, to uint32
	ev       Event
}

func r[S ~uint32](w word, from S, ev Event, to S) row {
	return row{w: w, from: uint32(from), to: uint32(to), ev: ev}
}

// qpTable is every transition of a QP: the only place they are defined. Where the code raises
// an event in any state of a word, every state has its row (to itself where nothing changes).
var qpTable = []row{
	// Send side: Default → Handshake → Fallback → WaitSignaled → WaitDrained → Default, and
	// Failed when the QP cannot fall back.
	r(wordSend, SendDefault, EvFailure, SendHandshake),
	r(wordSend, SendHandshake, EvPeerCount, SendFallback),
	r(wordSend, SendDefault, EvFatal, SendFailed),
	r(wordSend, SendHandshake, EvFatal, SendFailed),
	r(wordSend, SendFallback, EvFatal, SendFailed),
	r(wordSend, SendFallback, EvProbeOK, SendWaitSignaled),
	r(wordSend, SendWaitSignaled, EvFenceWR, SendWaitDrained),
	r(wordSend, SendWaitDrained, EvDrained, SendDefault),
	r(wordSend, SendWaitSignaled, EvFailure, SendFallback), // nothing of ours on the default QP yet
	r(wordSend, SendWaitDrained, EvFailure, SendHandshake),
	r(wordSend, SendWaitSignaled, EvFatal, SendFailed),
	r(wordSend, SendWaitDrained, EvFatal, SendFailed),
	// A chained failure (bkset.go): a round onto the next backup.
	r(wordSend, SendDefault, EvChain, SendHandshake),
	r(wordSend, SendFallback, EvChain, SendHandshake),
	r(wordSend, SendWaitSignaled, EvChain, SendHandshake),
	r(wordSend, SendWaitDrained, EvChain, SendHandshake),
	// A receive-only QP returns with its receive side: nothing it sent can be in flight
	// (recvonly.go).
	r(wordSend, SendFallback, EvNeverSent, SendDefault),

	// Receive side: Default ⇄ Fallback, and Failed.
	r(wordRecv, RecvDefault, EvRecvMoved, RecvFallback),
	r(wordRecv, RecvFallback, EvDrained, RecvDefault),
	r(wordRecv, RecvDefault, EvFatal, RecvFailed),
	r(wordRecv, RecvFallback, EvFatal, RecvFailed),

	// Round: our notification out (Await), the reply to reset only (AwaitReset).
	r(wordRound, RoundIdle, EvNotified, RoundAwait),
	r(wordRound, RoundAwait, EvNothingToRepost, RoundAwaitReset),
	r(wordRound, RoundIdle, EvRoundOver, RoundIdle),
	r(wordRound, RoundAwait, EvRoundOver, RoundIdle),
	r(wordRound, RoundAwaitReset, EvRoundOver, RoundIdle),

	// Pin: this side's switch and the peer's, independent.
	r(wordPin, PinNone, EvSwitchBackup, PinLocal),
	r(wordPin, PinPeer, EvSwitchBackup, PinBoth),
	r(wordPin, PinLocal, EvSwitchBackup, PinLocal),
	r(wordPin, PinBoth, EvSwitchBackup, PinBoth),
	r(wordPin, PinLocal, EvSwitchDefault, PinNone),
	r(wordPin, PinBoth, EvSwitchDefault, PinPeer),
	r(wordPin, PinNone, EvSwitchDefault, PinNone),
	r(wordPin, PinPeer, EvSwitchDefault, PinPeer),
	r(wordPin, PinNone, EvPeerPinned, PinPeer),
	r(wordPin, PinLocal, EvPeerPinned, PinBoth),
	r(wordPin, PinPeer, EvPeerPinned, PinPeer),
	r(wordPin, PinBoth, EvPeerPinned, PinBoth),
	r(wordPin, PinPeer, EvPeerBack, PinNone),
	r(wordPin, PinBoth, EvPeerBack, PinLocal),
	r(wordPin, PinNone, EvPeerBack, PinNone),
	r(wordPin, PinLocal, EvPeerBack, PinLocal),

	// Probe: one loop at a time; its end is raised on every path that leaves it.
	r(wordProbe, ProbeIdle, EvProbeStart, ProbeRunning),
	r(wordProbe, ProbeRunning, EvProbeStop, ProbeIdle),
	r(wordProbe, ProbeIdle, EvProbeStop, ProbeIdle),

	// Repost: set when a round moves a failed backup's sends, taken by its repost.
	r(wordRepost, RepostOwn, EvChainSends, RepostChain),
	r(wordRepost, RepostChain, EvChainSends, RepostChain),
	r(wordRepost, RepostChain, EvRepostTaken, RepostOwn),
	r(wordRepost, RepostOwn, EvRepostTaken, RepostOwn),

	// RKeys: a round starts over at most once after reading the peer's MR entries.
	r(wordRKeys, RKeysFirst, EvRKeysRetry, RKeysRetried),
	r(wordRKeys, RKeysRetried, EvRKeysDone, RKeysFirst),
	r(wordRKeys, RKeysFirst, EvRKeysDone, RKeysFirst),

	// Hold: from a round's first wait until flushHeld ends it.
	r(wordHold, HoldNone, EvHold, HoldPosts),
	r(wordHold, HoldPosts, EvHold, HoldPosts),
	r(wordHold, HoldPosts, EvRelease, HoldNone),
}

// qpIndex is qpTable by word, state and event.
var qpIndex = func() map[[3]uint32]uint32 {
	m := make(map[[3]uint32]uint32, len(qpTable))
	for _, t := range qpTable {
		k := [3]uint32{uint32(t.w), t.from, uint32(t.ev)}
		if _, dup := m[k]; dup {
			panic(fmt.Sprintf("failover: qpTable defines %s %s on %v twice", wordNames[t.w], stateName(t.w, t.from), t.ev))
		}
		m[k] = t.to
	}
	return m
}()

// machine holds the state words of a QP and the transition counters. Reads are atomic
// loads; transitions are made with the QP's mutex held.
type machine struct {
	words       [numWords]atomic.Uint32
	sendCounts  [numSendStates][numSendStates]atomic.Uint64
	recvCounts  [numRecvStates][numRecvStates]atomic.Uint64
	transitions *atomic.Uint64 // context-wide counter
	track       eventTrack     // last event, time on the backup (status.go)
}

func (m *machine) sendState() SendState     { return SendState(m.words[wordSend].Load()) }
func (m *machine) recvState() RecvState     { return RecvState(m.words[wordRecv].Load()) }
func (m *machine) roundState() RoundState   { return RoundState(m.words[wordRound].Load()) }
func (m *machine) pinState() PinState       { return PinState(m.words[wordPin].Load()) }
func (m *machine) probeState() ProbeState   { return ProbeState(m.words[wordProbe].Load()) }
func (m *machine) repostState() RepostState { return RepostState(m.words[wordRepost].Load()) }
func (m *machine) rkeysState() RKeysState   { return RKeysState(m.words[wordRKeys].Load()) }
func (m *machine) holdState() HoldState     { return HoldState(m.words[wordHold].Load()) }

// apply moves word w on ev by qpTable; the caller holds the QP mutex.
func (m *machine) apply(w word, ev Event) (from, to uint32, err error) {
	from = m.words[w].Load()
	to, ok := qpIndex[[3]uint32{uint32(w), from, uint32(ev)}]
	if !ok {
		return from, from, fmt.Errorf("failover: illegal %s transition %s on %v", wordNames[w], stateName(w, from), ev)
	}
	m.words[w].Store(to)
	return from, to, nil
}

// sendEvent applies ev to the send side, counting the transition.
func (m *machine) sendEvent(ev Event) (SendState, error) {
	from, to, err := m.apply(wordSend, ev)
	if err != nil {
		return SendState(from), err
	}
	m.track.event(ev, SendState(from), SendState(to))
	m.sendCounts[from][to].Add(1)
	if m.transitions != nil {
		m.transitions.Add(1)
	}
	return SendState(to), nil
}

// recvEvent applies ev to the receive side, counting the transition.
func (m *machine) recvEvent(ev Event) (RecvState, error) {
	from, to, err := m.apply(wordRecv, ev)
	if err != nil {
		return RecvState(from), err
	}
	m.track.event(ev, m.sendState(), m.sendState())
	m.recvCounts[from][to].Add(1)
	if m.transitions != nil {
		m.transitions.Add(1)
	}
	return RecvState(to), nil
}

// event applies ev to word w; roundEvent and pinEvent to the round and the pin.
func (m *machine) event(w word, ev Event) error {
	_, _, err := m.apply(w, ev)
	return err
}
func (m *machine) roundEvent(ev Event) error { return m.event(wordRound, ev) }
func (m *machine) pinEvent(ev Event) error   { return m.event(wordPin, ev) }

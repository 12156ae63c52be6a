package failover

import (
	"strings"
	"testing"
)

// TestRoundAndPinTables: the events the code raises in any state (EvRoundOver on every path
// that ends or abandons a round; every pin event) are defined in every state, and the
// round's entry events only where the code raises them: EvNotified from Idle (a round under
// way returns before), EvNothingToRepost right after it.
func TestRoundAndPinTables(t *testing.T) {
	var m machine
	for s := range numRoundStates {
		m.words[wordRound].Store(uint32(s))
		if err := m.roundEvent(EvRoundOver); err != nil || m.roundState() != RoundIdle {
			t.Errorf("RoundOver in %v: %v, now %v", s, err, m.roundState())
		}
	}
	for _, ev := range []Event{EvSwitchBackup, EvSwitchDefault, EvPeerPinned, EvPeerBack} {
		for s := range numPinStates {
			m.words[wordPin].Store(uint32(s))
			if err := m.pinEvent(ev); err != nil {
				t.Errorf("%v in pin state %v: %v", ev, s, err)
			}
		}
	}
	m.words[wordRound].Store(uint32(RoundIdle))
	if m.roundEvent(EvNotified) != nil || m.roundEvent(EvNothingToRepost) != nil || m.roundState() != RoundAwaitReset {
		t.Fatalf("Idle → Notified → NothingToRepost: %v", m.roundState())
	}
	if err := m.roundEvent(EvNotified); err == nil || m.roundState() != RoundAwaitReset {
		t.Errorf("a second notification of a round under way: %v, now %v", err, m.roundState())
	}
	// Local and peer pins are independent: both sides' switches end in either order.
	m.words[wordPin].Store(uint32(PinNone))
	for _, ev := range []Event{EvSwitchBackup, EvPeerPinned, EvSwitchDefault} {
		_ = m.pinEvent(ev)
	}
	if p := m.pinState(); p != PinPeer || !p.peer() || p.local() {
		t.Errorf("pin after local switch, peer pin, local switch back: %v", p)
	}
}

// TestFlagWords: the words that were flags beside the table (probing, chainRepost, rkRetry,
// held) move only by their rows: one probe loop at a time, a round started over at most once,
// a hold ended only once it began; the events raised on every exit path (EvProbeStop,
// EvRepostTaken, EvRKeysDone) are defined in every state. Every row names its states.
func TestFlagWords(t *testing.T) {
	var m machine
	if m.event(wordProbe, EvProbeStart) != nil || m.event(wordProbe, EvProbeStart) == nil || m.probeState() != ProbeRunning {
		t.Fatalf("a second probe loop started: %v", m.probeState())
	}
	for range 2 {
		if err := m.event(wordProbe, EvProbeStop); err != nil || m.probeState() != ProbeIdle {
			t.Fatalf("probe stop: %v, %v", err, m.probeState())
		}
	}
	for _, ev := range []Event{EvChainSends, EvChainSends, EvRepostTaken, EvRepostTaken} {
		if err := m.event(wordRepost, ev); err != nil {
			t.Fatalf("repost %v: %v", ev, err)
		}
	}
	if m.event(wordRKeys, EvRKeysRetry) != nil || m.event(wordRKeys, EvRKeysRetry) == nil || m.rkeysState() != RKeysRetried {
		t.Fatalf("a round started over twice: %v", m.rkeysState())
	}
	for range 2 {
		if err := m.event(wordRKeys, EvRKeysDone); err != nil || m.rkeysState() != RKeysFirst {
			t.Fatalf("rkeys done: %v, %v", err, m.rkeysState())
		}
	}
	if m.event(wordHold, EvRelease) == nil {
		t.Fatal("a hold released before it began")
	}
	for _, ev := range []Event{EvHold, EvHold, EvRelease} {
		if err := m.event(wordHold, ev); err != nil {
			t.Fatalf("hold %v: %v", ev, err)
		}
	}
	if m.holdState() != HoldNone {
		t.Fatalf("hold: %v", m.holdState())
	}
	for _, row := range qpTable {
		for _, s := range []uint32{row.from, row.to} {
			if n := stateName(row.w, s); strings.Contains(n, "(") || strings.Contains(n, " state ") {
				t.Errorf("%s row on %v: state %d has no name (%s)", wordNames[row.w], row.ev, s, n)
			}
		}
	}
}

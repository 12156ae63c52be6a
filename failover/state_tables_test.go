package failover

import "testing"

// TestRoundAndPinTables: the events the code raises in any state (EvRoundOver on every path
// that ends or abandons a round; every pin event) are defined in every state, and the
// round's entry events only where the code raises them: EvNotified from Idle (a round under
// way returns before), EvNothingToRepost right after it.
func TestRoundAndPinTables(t *testing.T) {
	var m machine
	for s := range numRoundStates {
		m.round.Store(uint32(s))
		if err := m.roundEvent(EvRoundOver); err != nil || m.roundState() != RoundIdle {
			t.Errorf("RoundOver in %v: %v, now %v", s, err, m.roundState())
		}
	}
	for _, ev := range []Event{EvSwitchBackup, EvSwitchDefault, EvPeerPinned, EvPeerBack} {
		for s := range numPinStates {
			m.pin.Store(uint32(s))
			if err := m.pinEvent(ev); err != nil {
				t.Errorf("%v in pin state %v: %v", ev, s, err)
			}
		}
	}
	m.round.Store(uint32(RoundIdle))
	if m.roundEvent(EvNotified) != nil || m.roundEvent(EvNothingToRepost) != nil || m.roundState() != RoundAwaitReset {
		t.Fatalf("Idle → Notified → NothingToRepost: %v", m.roundState())
	}
	if err := m.roundEvent(EvNotified); err == nil || m.roundState() != RoundAwaitReset {
		t.Errorf("a second notification of a round under way: %v, now %v", err, m.roundState())
	}
	// Local and peer pins are independent: both sides' switches end in either order.
	m.pin.Store(uint32(PinNone))
	for _, ev := range []Event{EvSwitchBackup, EvPeerPinned, EvSwitchDefault} {
		_ = m.pinEvent(ev)
	}
	if p := m.pinState(); p != PinPeer || !p.peer() || p.local() {
		t.Errorf("pin after local switch, peer pin, local switch back: %v", p)
	}
}

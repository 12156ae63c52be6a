package emu

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func TestModifyOKRCPath(t *testing.T) {
	steps := []struct {
		cur, next QPState
		mask      QPAttrMask
	}{
		{QPSReset, QPSInit, AttrState | AttrPKeyIndex | AttrPort | AttrAccessFlags},
		{QPSInit, QPSInit, AttrState | AttrAccessFlags},
		{QPSInit, QPSRTR, AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer},
		{QPSRTR, QPSRTS, AttrState | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrSQPSN | AttrMaxQPRdAtomic},
		{QPSRTS, QPSRTS, AttrState | AttrCurState | AttrMinRNRTimer},
		{QPSRTS, QPSSQD, AttrState},
		{QPSSQD, QPSRTS, AttrState},
		{QPSRTS, QPSErr, AttrState},
		{QPSErr, QPSReset, AttrState},
		{QPSReset, QPSReset, AttrState},
	}
	for _, s := range steps {
		if err := modifyOK(s.cur, s.next, s.mask); err != nil {
			t.Errorf("%v→%v mask %#x: %v", s.cur, s.next, s.mask, err)
		}
	}
}

func TestModifyOKRejects(t *testing.T) {
	bad := []struct {
		name      string
		cur, next QPState
		mask      QPAttrMask
	}{
		{"reset to rtr", QPSReset, QPSRTR, AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer},
		{"reset to rts", QPSReset, QPSRTS, AttrState},
		{"init to rts", QPSInit, QPSRTS, AttrState | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrSQPSN | AttrMaxQPRdAtomic},
		{"err to rts", QPSErr, QPSRTS, AttrState},
		{"init missing port", QPSReset, QPSInit, AttrState | AttrPKeyIndex | AttrAccessFlags},
		{"rtr missing min rnr", QPSInit, QPSRTR, AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic},
		{"rtr extra sq psn", QPSInit, QPSRTR, AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer | AttrSQPSN},
		{"rts missing timeout", QPSRTR, QPSRTS, AttrState | AttrRetryCnt | AttrRNRRetry | AttrSQPSN | AttrMaxQPRdAtomic},
		{"init extra timeout", QPSReset, QPSInit, AttrState | AttrPKeyIndex | AttrPort | AttrAccessFlags | AttrTimeout},
		{"cur state from init", QPSInit, QPSInit, AttrState | AttrCurState},
		{"reset to err", QPSReset, QPSErr, AttrState},
		{"to err with extra", QPSRTS, QPSErr, AttrState | AttrTimeout},
		{"rts to rts path mtu", QPSRTS, QPSRTS, AttrState | AttrPathMTU},
		{"bad state number", QPSInit, QPState(9), AttrState},
	}
	for _, b := range bad {
		err := modifyOK(b.cur, b.next, b.mask)
		if !errors.Is(err, unix.EINVAL) || !errors.Is(err, ErrBadTransition) {
			t.Errorf("%s: got %v, want EINVAL", b.name, err)
		}
	}
}

// Every transition not listed in IBA table 91 for RC must be refused whatever the mask.
func TestModifyOKTableClosed(t *testing.T) {
	legal := map[[2]QPState]bool{}
	for c := QPSReset; c <= QPSErr; c++ {
		for n := QPSReset; n <= QPSErr; n++ {
			if rcStateTable[c][n].valid {
				legal[[2]QPState{c, n}] = true
			}
		}
	}
	if len(legal) != 22 {
		t.Fatalf("table has %d legal transitions, want 22 (qp_state_table)", len(legal))
	}
	for c := QPSReset; c <= QPSErr; c++ {
		for n := QPSReset; n <= QPSErr; n++ {
			if legal[[2]QPState{c, n}] {
				continue
			}
			for _, m := range []QPAttrMask{AttrState, AttrState | 0x1ffffc} {
				if err := modifyOK(c, n, m); err == nil {
					t.Errorf("%v→%v mask %#x accepted", c, n, m)
				}
			}
		}
	}
}

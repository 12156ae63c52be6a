package provider_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/shift-rdma/shift/internal/hiltest"
)

// TestHIL runs the end-to-end bodies against real devices named by SHIFT_HIL_DEVICES (two
// mlx5 ports that reach each other); bodies that need fault injection skip there.
func TestHIL(t *testing.T) {
	hiltest.Need(t, 2)
	runHIL(t)
}

// TestHILPlumbing runs the hardware suite against emulated devices named through
// SHIFT_HIL_DEVICES, so the hardware path itself (device selection by name, GID index from
// the environment, bodies without fault injection) is exercised where there is no hardware.
func TestHILPlumbing(t *testing.T) {
	if os.Getenv("SHIFT_HIL_DEVICES") != "" {
		t.Skip("real devices configured; TestHIL covers them")
	}
	emuTB := newTestbed(t)
	hiltest.Emulate(t, emuTB.names[:], -1, func(dev string, up bool) error {
		return fmt.Errorf("the provider's hardware bodies never set links (asked for %s)", dev)
	})
	runHIL(t)
}

func runHIL(t *testing.T) {
	for _, b := range []struct {
		name string
		fn   func(*testing.T, *testbed)
	}{
		{"EveryOpcode", everyOpcodeBody},
		{"PingPong", e2ePingPong},
		{"BandwidthWrites", e2eBandwidthWrites},
		{"BadRKeyThenFlush", e2eBadRKeyThenFlush},
		{"CompletionEvent", e2eCompletionEvent},
		{"WithheldDoorbellAndCopy", e2eWithheldDoorbellAndCopy},
		{"ResetAndReconnect", e2eResetAndReconnect},
		{"LocalProtectionAndRNR", e2eLocalProtectionAndRNR},
		{"SolicitedEvent", e2eSolicitedEvent},
		{"DevicesQueriesAndGIDs", e2eDevicesQueriesAndGIDs},
		{"MRAccessFlags", e2eMRAccessFlags},
		{"CQOverrunEvent", e2eCQOverrunEvent},
		{"DrainMarker", e2eDrainMarker},
	} {
		t.Run(b.name, func(t *testing.T) { b.fn(t, hilTestbed(t)) })
	}
}

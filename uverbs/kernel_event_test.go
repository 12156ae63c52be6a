package uverbs

import (
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// TestKernelAsyncPortEvents flips the link under the rxe device and reads the resulting
// IBV_EVENT_PORT_ERR / PORT_ACTIVE from the context's async fd: the real kernel's struct
// ib_uverbs_async_event_desc through ReadAsyncEvent. It only touches a dummy netdev (the VM's
// setup) or a link the operator names with SHIFT_UVERBS_FLAP_OK=1, never a real NIC by default.
func TestKernelAsyncPortEvents(t *testing.T) {
	k := openKernel(t)
	p1, _ := k.info.Port(1)
	if p1.Netdev == "" {
		t.Skipf("port 1 of %s has no netdev to flip", k.info.Name)
	}
	link, err := netlink.LinkByName(p1.Netdev)
	if err != nil {
		t.Skipf("netdev %s: %v", p1.Netdev, err)
	}
	if link.Type() != "dummy" && os.Getenv("SHIFT_UVERBS_FLAP_OK") != "1" {
		t.Skipf("netdev %s is a %s link, not dummy: not flipping it (set SHIFT_UVERBS_FLAP_OK=1 to allow)", p1.Netdev, link.Type())
	}
	if os.Geteuid() != 0 {
		t.Skip("flipping a link needs root")
	}
	t.Cleanup(func() { netlink.LinkSetUp(link) })

	wait := func(want uint32) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			ok, err := WaitReadable(k.ctx.AsyncFD, time.Until(deadline))
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			ev, err := ReadAsyncEvent(k.ctx.AsyncFD)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("async event: %s element %d", EventName(ev.Type), ev.Element)
			if ev.Type == want {
				if ev.Element != 1 {
					t.Errorf("%s for port %d, want port 1", EventName(ev.Type), ev.Element)
				}
				return
			}
		}
		t.Fatalf("no %s on the async fd within 20s", EventName(want))
	}

	if err := netlink.LinkSetDown(link); err != nil {
		t.Fatalf("link down %s: %v", p1.Netdev, err)
	}
	wait(EventPortErr)
	port, err := QueryPort(k.f, k.driverID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if port.Legacy_resp.State != PortDown {
		t.Errorf("port state %d after link down, want DOWN", port.Legacy_resp.State)
	}
	t.Logf("verified: link %s down -> async fd PORT_ERR for port 1 (read as ib_uverbs_async_event_desc), QUERY_PORT state %d", p1.Netdev, port.Legacy_resp.State)
	if err := netlink.LinkSetUp(link); err != nil {
		t.Fatalf("link up %s: %v", p1.Netdev, err)
	}
	wait(EventPortActive)
	port, err = QueryPort(k.f, k.driverID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if port.Legacy_resp.State != PortActive {
		t.Errorf("port state %d after link up, want ACTIVE", port.Legacy_resp.State)
	}
	t.Logf("verified: link %s up -> async fd PORT_ACTIVE for port 1, QUERY_PORT state %d", p1.Netdev, port.Legacy_resp.State)
}

package mlx5

import (
	"strconv"
	"testing"
)

// TestWCStrings pins the two spellings of a completion status (the ibv_wc_status_str text
// verbs applications print, and the IBV_WC_ name) and the opcode names, including the
// fallback for values outside the enums.
func TestWCStrings(t *testing.T) {
	for _, c := range []struct {
		s         WCStatus
		str, name string
	}{
		{WCSuccess, "success", "SUCCESS"},
		{WCWRFlushErr, "Work Request Flushed Error", "WR_FLUSH_ERR"},
		{WCRetryExcErr, "transport retry counter exceeded", "RETRY_EXC_ERR"},
		{WCRemInvRdReqErr, "remote invalid RD request", "REM_INV_RD_REQ_ERR"},
		{WCGeneralErr, "general error", "GENERAL_ERR"},
		{WCGeneralErr + 1, "WC_STATUS_22", "WC_STATUS_22"},
	} {
		if got := c.s.String(); got != c.str {
			t.Errorf("WCStatus(%d).String() = %q, want %q", uint32(c.s), got, c.str)
		}
		if got := c.s.Name(); got != c.name {
			t.Errorf("WCStatus(%d).Name() = %q, want %q", uint32(c.s), got, c.name)
		}
	}
	for st := WCSuccess; st <= WCGeneralErr; st++ {
		fallback := "WC_STATUS_" + strconv.Itoa(int(st))
		if st.String() == fallback || st.Name() == fallback {
			t.Errorf("status %d is missing from a table: %q, %q", uint32(st), st.String(), st.Name())
		}
	}
	for o, want := range map[WCOpcode]string{
		WCSend: "SEND", WCLocalInv: "LOCAL_INV", WCRecvRDMAWithImm: "RECV_RDMA_WITH_IMM", 7: "WC_OPCODE_7",
	} {
		if got := o.String(); got != want {
			t.Errorf("WCOpcode(%d).String() = %q, want %q", uint32(o), got, want)
		}
	}
}

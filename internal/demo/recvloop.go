package demo

import (
	"context"
	"fmt"

	"github.com/shift-rdma/shift/provider/verbs"
)

// receiveLoop polls rcv until ctx ends and hands each successful completion to handle, in
// the order polled. A poll error or an error completion ends the stream, recorded in st as the
// receiver's failure; handle returns false when it has recorded a failure of its own.
func receiveLoop(ctx context.Context, st *streamStats, rcv Side, handle func(wc *verbs.WC) bool) {
	var wcs [16]verbs.WC
	var id idler
	for ctx.Err() == nil {
		n, err := rcv.Poll(wcs[:])
		if err != nil {
			st.fail("receiver", "poll: "+err.Error(), verbs.WCSuccess)
			return
		}
		if n == 0 {
			id.idle()
			continue
		}
		id.busy()
		for i := range wcs[:n] {
			wc := &wcs[i]
			if wc.Status != verbs.WCSuccess {
				st.fail("receiver", fmt.Sprintf("receive completion %v", wc.Status), wc.Status)
				return
			}
			if !handle(wc) {
				return
			}
		}
	}
}

package fabric

import "sync/atomic"

// Stats are an endpoint's packet counters since it was created.
type Stats struct {
	TxPackets uint64 // packets accepted for transmission while the link was up
	TxBytes   uint64 // their payload bytes
	TxDropped uint64 // packets lost on the transmit side: link down, TX fault, no such destination, send error
	TxInvalid uint64 // of TxDropped, packets refused because they could not be put on a wire (see roce.Packet.Validate)
	RxPackets uint64 // packets handed to the receiver
	RxBytes   uint64 // their payload bytes
	RxDropped uint64 // packets lost on the receive side: link down, RX fault, no receiver, queue full, bad ICRC
}

// counters is the live, atomically updated form of Stats.
type counters struct {
	txPackets, txBytes, txDropped atomic.Uint64
	txInvalid                     atomic.Uint64
	rxPackets, rxBytes, rxDropped atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		TxPackets: c.txPackets.Load(), TxBytes: c.txBytes.Load(), TxDropped: c.txDropped.Load(), TxInvalid: c.txInvalid.Load(),
		RxPackets: c.rxPackets.Load(), RxBytes: c.rxBytes.Load(), RxDropped: c.rxDropped.Load(),
	}
}

package rc

import "time"

// PSNs are 24-bit sequence numbers compared in a window of half the space (IBA 9.7.1).
const (
	psnMask = 1<<24 - 1
	psnHalf = 1 << 23
)

func psnAdd(a, n uint32) uint32 { return (a + n) & psnMask }

// psnDiff returns a-b as a signed distance in the 24-bit PSN space.
func psnDiff(a, b uint32) int32 {
	d := (a - b) & psnMask
	if d >= psnHalf {
		return int32(d) - 1<<24
	}
	return int32(d)
}

func psnLT(a, b uint32) bool { return psnDiff(a, b) < 0 }
func psnLE(a, b uint32) bool { return psnDiff(a, b) <= 0 }

// ackTimeout is the local ACK timeout for the exponent t: 4.096 µs × 2^t (IBA 11.2.4.2,
// ibv_modify_qp(3)); 0 disables the timer.
func ackTimeout(t uint8) time.Duration {
	if t == 0 {
		return 0
	}
	return time.Duration(4096<<t) * time.Nanosecond
}

// rnrTimerTable gives the RNR NAK delay for each 5-bit timer code, in microseconds
// (IBA table 45, enum ib_rnr_timeout in the kernel's ib_verbs.h).
var rnrTimerTable = [32]uint32{
	655360, 10, 20, 30, 40, 60, 80, 120,
	160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
}

// RNRDelay returns the delay an RNR NAK carrying timer code c asks the requester to wait.
func RNRDelay(c uint8) time.Duration {
	return time.Duration(rnrTimerTable[c&31]) * time.Microsecond
}

// packets returns how many packets a message of n bytes takes at the given MTU (a zero-length
// message still takes one).
func packets(n, mtu int) uint32 {
	if n <= 0 {
		return 1
	}
	return uint32((n + mtu - 1) / mtu)
}

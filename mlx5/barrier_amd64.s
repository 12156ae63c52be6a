#include "textflag.h"

// func ToDeviceBarrier()
// x86-64 keeps stores in program order (TSO); udma_to_device_barrier is a compiler barrier
// only, which an assembly call already is.
TEXT ·ToDeviceBarrier(SB), NOSPLIT|NOFRAME, $0-0
	RET

// func FromDeviceBarrier()
TEXT ·FromDeviceBarrier(SB), NOSPLIT|NOFRAME, $0-0
	LFENCE
	RET

// func FlushWrites()
TEXT ·FlushWrites(SB), NOSPLIT|NOFRAME, $0-0
	SFENCE
	RET

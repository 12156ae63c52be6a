#include "textflag.h"

// DMB/DSB option values (Arm ARM C6.2.81): OSHLD=1, OSHST=2, ST=14.

// func ToDeviceBarrier()
TEXT ·ToDeviceBarrier(SB), NOSPLIT|NOFRAME, $0-0
	DMB	$2	// DMB OSHST
	RET

// func FromDeviceBarrier()
TEXT ·FromDeviceBarrier(SB), NOSPLIT|NOFRAME, $0-0
	DMB	$1	// DMB OSHLD
	RET

// func FlushWrites()
TEXT ·FlushWrites(SB), NOSPLIT|NOFRAME, $0-0
	DSB	$14	// DSB ST
	RET

package demo

import "testing"

func TestPattern(t *testing.T) {
	b := make([]byte, 4096)
	fillPattern(b, writeTag, 7)
	if bad := checkPattern(b, writeTag, 7); bad != -1 {
		t.Fatalf("fresh pattern fails at %d", bad)
	}
	for _, c := range []struct {
		tag byte
		seq uint64
	}{{writeTag, 6}, {writeTag, 8}, {sendTag, 7}} {
		if checkPattern(b, c.tag, c.seq) != 0 {
			t.Fatalf("message 7's bytes pass as tag %c message %d", c.tag, c.seq)
		}
	}
	b[1234] ^= 0x10
	if bad := checkPattern(b, writeTag, 7); bad != 1232 {
		t.Fatalf("flipped bit at byte 1234 reported at %d, want word 1232", bad)
	}
	// A shifted copy (a WRITE landing 8 bytes off) is caught.
	fillPattern(b, writeTag, 7)
	copy(b[8:], b[:len(b)-8])
	if checkPattern(b, writeTag, 7) != 8 {
		t.Fatal("shifted data not caught")
	}
}

package demo

import "encoding/binary"

// The payload of message seq of a stream is a sequence of 64-bit words, each a mix of the
// stream's tag, the sequence number and the word's index: any stale, shifted, duplicated or
// foreign data fails the check.

func patternWord(tag byte, seq uint64, k int) uint64 {
	return (seq+1)*0x9E3779B97F4A7C15 ^ uint64(k+1)*0xBF58476D1CE4E5B9 ^ uint64(tag)<<56
}

// fillPattern writes message seq's pattern over b (len(b) a multiple of 8).
func fillPattern(b []byte, tag byte, seq uint64) {
	for k := 0; k+8 <= len(b); k += 8 {
		binary.LittleEndian.PutUint64(b[k:], patternWord(tag, seq, k/8))
	}
}

// checkPattern returns the offset of the first word of b that is not message seq's pattern,
// or -1.
func checkPattern(b []byte, tag byte, seq uint64) int {
	for k := 0; k+8 <= len(b); k += 8 {
		if binary.LittleEndian.Uint64(b[k:]) != patternWord(tag, seq, k/8) {
			return k
		}
	}
	return -1
}

package rc

// gatherAt copies into dst the bytes of the gather list src starting at byte offset off.
func gatherAt(dst []byte, src [][]byte, off int) {
	for _, s := range src {
		if off >= len(s) {
			off -= len(s)
			continue
		}
		n := copy(dst, s[off:])
		dst = dst[n:]
		off = 0
		if len(dst) == 0 {
			return
		}
	}
}

// scatterAt copies src into the scatter list dst starting at byte offset off; it reports false
// when the list is too short to hold it.
func scatterAt(dst [][]byte, off int, src []byte) bool {
	for _, d := range dst {
		if len(src) == 0 {
			return true
		}
		if off >= len(d) {
			off -= len(d)
			continue
		}
		n := copy(d[off:], src)
		src = src[n:]
		off = 0
	}
	return len(src) == 0
}

func totalLen(l [][]byte) int {
	n := 0
	for _, s := range l {
		n += len(s)
	}
	return n
}

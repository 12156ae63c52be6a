//go:build cgo

// Package verbsoracle reads the enum values of libibverbs' <infiniband/verbs.h>, by name,
// for package verbs' tests. It is test support only. Without cgo or without the header
// (libibverbs-dev), Available reports false and the tests that need it skip.
package verbsoracle

// #include "oracle.h"
import "C"

import "unsafe"

// Available reports whether verbs.h was compiled in.
func Available() bool { return C.vo_available() != 0 }

// Constants returns every constant of the table by its C name.
func Constants() map[string]int64 {
	var n C.int
	p := C.vo_table(&n)
	out := map[string]int64{}
	for _, e := range unsafe.Slice(p, int(n)) {
		out[C.GoString(e.name)] = int64(e.value)
	}
	return out
}

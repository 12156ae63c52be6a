package emu

import "unsafe"

// The uverbs ABI structs (package uverbs, generated from the uapi headers) travel as their
// in-memory bytes, exactly as the kernel copies them from and to user space.

// decode copies the leading bytes of b into a T; a short b leaves the rest zero, as the
// kernel's copy of a shorter struct from an older library does.
func decode[T any](b []byte) T {
	var v T
	dst := unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v))
	copy(dst, b)
	return v
}

// encode returns the bytes of v.
func encode[T any](v *T) []byte {
	src := unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
	return append([]byte(nil), src...)
}

// sizeOf is sizeof(T).
func sizeOf[T any]() int {
	var v T
	return int(unsafe.Sizeof(v))
}

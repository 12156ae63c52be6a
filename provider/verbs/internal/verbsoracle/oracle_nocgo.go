//go:build !cgo

// Package verbsoracle reads the enum values of libibverbs' <infiniband/verbs.h> for package
// verbs' tests; built without cgo it has nothing behind it and Available reports false.
package verbsoracle

// Available reports whether verbs.h was compiled in (never, without cgo).
func Available() bool { return false }

// Constants is empty without cgo.
func Constants() map[string]int64 { return nil }

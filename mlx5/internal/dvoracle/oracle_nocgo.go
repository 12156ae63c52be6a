//go:build !cgo

// Package dvoracle produces reference bytes for package mlx5's tests from C headers; built
// without cgo it offers nothing and the tests that need it skip.
package dvoracle

// DVAvailable reports whether the mlx5dv.h oracle was compiled in (never, without cgo).
func DVAvailable() bool { return false }

// ABIAvailable reports whether the mlx5-abi.h oracle was compiled in (never, without cgo).
func ABIAvailable() bool { return false }

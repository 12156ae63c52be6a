//go:build !cgo

// Package dvoracle produces reference bytes for package mlx5's tests from C headers; built
// without cgo it offers the same API with nothing behind it, DVAvailable and ABIAvailable
// report false, and the tests that need it skip.
package dvoracle

// DVAvailable reports whether the mlx5dv.h oracle was compiled in (never, without cgo).
func DVAvailable() bool { return false }

// ABIAvailable reports whether the mlx5-abi.h oracle was compiled in (never, without cgo).
func ABIAvailable() bool { return false }

// CtrlSeg is unavailable without cgo.
func CtrlSeg(uint16, uint8, uint8, uint32, uint8, uint8, uint8, uint32) (b [16]byte) { return }

// DataSeg is unavailable without cgo.
func DataSeg(uint32, uint32, uint64) (b [16]byte) { return }

// RaddrSeg is unavailable without cgo.
func RaddrSeg(uint64, uint32) (b [16]byte) { return }

// AtomicSeg is unavailable without cgo.
func AtomicSeg(uint64, uint64) (b [16]byte) { return }

// InlineHdr is unavailable without cgo.
func InlineHdr(uint32) (b [4]byte) { return }

// CQE64 is unavailable without cgo.
func CQE64(CQE) (b [64]byte) { return }

// ErrCQE64 is unavailable without cgo.
func ErrCQE64(ErrCQE) (b [64]byte) { return }

// CQEGetters is unavailable without cgo.
func CQEGetters([64]byte) (owner, se, format, opcode uint8) { return }

// Fields is empty without cgo.
func Fields() []Field { return nil }

// Consts is empty without cgo.
func Consts() []Const { return nil }

// AllocUcontextReqV2 is unavailable without cgo.
func AllocUcontextReqV2(uint32, uint32, uint32, uint32, uint8, uint64) []byte { return nil }

// AllocUcontextResp is unavailable without cgo.
func AllocUcontextResp([22]uint64) []byte { return nil }

// CreateCQ is unavailable without cgo.
func CreateCQ(uint64, uint64, uint32, uint8, uint8, uint16, uint16) []byte { return nil }

// CreateCQResp is unavailable without cgo.
func CreateCQResp(uint32) []byte { return nil }

// CreateQP is unavailable without cgo.
func CreateQP(uint64, uint64, uint32, uint32, uint32, uint32, uint32, uint32, uint64, uint32, uint8, uint8) []byte {
	return nil
}

// CreateQPResp is unavailable without cgo.
func CreateQPResp(uint32, uint32, uint32, uint32, uint32, uint32, uint32, uint64) []byte { return nil }

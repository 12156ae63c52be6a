//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package mlx5

// opOwnShift places op_own, the last byte in memory of a CQE's last 32-bit word, in the low
// byte of that word loaded natively.
const opOwnShift = 24

// swapBE: a big-endian word loaded natively needs its bytes reversed.
const swapBE = true

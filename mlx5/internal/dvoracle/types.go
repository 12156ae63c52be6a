package dvoracle

// The value types of the oracle's API, shared by the cgo build and the stub without cgo.

// CQE holds host-order values for the fields of struct mlx5_cqe64 the oracle fills.
type CQE struct {
	WQEID, SLID, WQECounter                                uint16
	MLPath, Signature, OpOwn                               uint8
	FlagsRQPN, SRQNUIdx, ImmInvalPKey, ByteCnt, SopDropQPN uint32
	Timestamp                                              uint64
}

// ErrCQE holds host-order values for struct mlx5_err_cqe.
type ErrCQE struct {
	SRQN, SWQEOpcodeQPN     uint32
	VendorErrSynd, Syndrome uint8
	WQECounter              uint16
	Signature, OpOwn        uint8
}

// Field is the offset and size of one C struct member; Name "" stands for the struct itself
// (Size is its sizeof).
type Field struct {
	Struct, Name string
	Off, Size    int
}

// Const is a named constant of the headers.
type Const struct {
	Name  string
	Value int64
}

package fabric

import "errors"

// Errors returned by the fabric; test with errors.Is.
var (
	// ErrAddrInUse: another endpoint of the fabric already has this address.
	ErrAddrInUse = errors.New("fabric: address in use")
	// ErrClosed: the fabric or link is closed.
	ErrClosed = errors.New("fabric: closed")
	// ErrBadAddr: the address is not a valid unicast IP.
	ErrBadAddr = errors.New("fabric: bad address")
)

package uverbs

// Context creation. rdma-core 44 with a 6.1 kernel uses the ioctl path for GET_CONTEXT
// (cmd_device.c cmd_get_context, with the driver's alloc_ucontext request/response as UHW_IN /
// UHW_OUT) and then allocates the async event fd with a separate ASYNC_EVENT_ALLOC ioctl
// (ibv_cmd_alloc_async_fd); the legacy write GET_CONTEXT returns the async fd in its response.

// Context is what creating a user context returns.
type Context struct {
	AsyncFD        int    // the async event fd (owned by the caller; close it when done)
	NumCompVectors uint32 // completion vectors the device offers
	CoreSupport    uint64 // IB_UVERBS_CORE_SUPPORT_* bits (ioctl path only)
}

// GetContext creates the file's user context over RDMA_VERBS_IOCTL
// (UVERBS_METHOD_GET_CONTEXT), passing the driver's request and response, then allocates the
// async event fd (UVERBS_METHOD_ASYNC_EVENT_ALLOC). driverID is the device's enum
// rdma_driver_id, which every ioctl must carry.
func GetContext(f File, driverID uint32, driverIn, driverOut []byte) (Context, error) {
	var ncv [4]byte
	var core [8]byte
	c := NewIoctl(ObjectDevice, MethodGetContext, driverID)
	c.Out(AttrGetContextNumCompVectors, ncv[:])
	c.Out(AttrGetContextCoreSupport, core[:])
	c.UHW(driverIn, driverOut)
	if err := c.Exec(f, "ioctl GET_CONTEXT"); err != nil {
		return Context{}, err
	}
	ctx := Context{
		NumCompVectors: fromBytes[uint32](ncv[:]),
		CoreSupport:    fromBytes[uint64](core[:]),
	}
	fd, err := AllocAsyncFD(f, driverID)
	if err != nil {
		return ctx, err
	}
	ctx.AsyncFD = fd
	return ctx, nil
}

// AllocAsyncFD creates the context's async event fd (UVERBS_METHOD_ASYNC_EVENT_ALLOC).
func AllocAsyncFD(f File, driverID uint32) (int, error) {
	c := NewIoctl(ObjectAsyncEvent, MethodAsyncEventAlloc, driverID)
	i := c.OutFD(AttrAsyncEventAllocFDHandle)
	if err := c.Exec(f, "ioctl ASYNC_EVENT_ALLOC"); err != nil {
		return -1, err
	}
	return c.FD(i), nil
}

// GetContextWrite creates the user context with the legacy write command
// (IB_USER_VERBS_CMD_GET_CONTEXT); the response carries the async fd.
func GetContextWrite(f File, driverIn, driverOut []byte) (Context, error) {
	var cmd GetContextCmd
	var resp GetContextResp
	if err := Write(f, CmdGetContext, structBytes(&cmd), driverIn, structBytes(&resp), driverOut); err != nil {
		return Context{}, err
	}
	return Context{AsyncFD: int(resp.Async_fd), NumCompVectors: resp.Num_comp_vectors}, nil
}

package uverbs

// InvokeWrite issues write() command cmd (IB_USER_VERBS_CMD_FLAG_EXTENDED set for an
// extended one) through UVERBS_METHOD_INVOKE_WRITE, as rdma-core's ioctl_write does once the
// kernel has the method: coreIn is the command struct after its headers (for a legacy command
// with a response, starting with the ignored response pointer), driverIn the driver data;
// the kernel writes the response to coreOut and the driver response to driverOut.
func InvokeWrite(f File, driverID uint32, cmd uint32, coreIn, driverIn, coreOut, driverOut []byte) error {
	c := NewIoctl(ObjectDevice, MethodInvokeWrite, driverID)
	c.InU64(AttrWriteCmd, uint64(cmd))
	if len(coreIn) > 0 {
		c.In(AttrCoreIn, coreIn)
	}
	if len(coreOut) > 0 {
		c.Out(AttrCoreOut, coreOut)
	}
	c.UHW(driverIn, driverOut)
	return c.Exec(f, "ioctl INVOKE_WRITE")
}

package uverbs

// PD and MR commands. rdma-core 44: ALLOC_PD and REG_MR are legacy write commands (cmd.c;
// the kernel has no ioctl to create either); DEALLOC_PD and DEREG_MR use the PD_DESTROY and
// MR_DESTROY ioctls (cmd_pd.c, cmd_mr.c), with the write commands as fallback.

// AllocPD allocates a protection domain and returns its handle.
func AllocPD(f File, driverIn, driverOut []byte) (uint32, error) {
	var cmd AllocPDCmd
	var resp AllocPDResp
	if err := Write(f, CmdAllocPD, structBytes(&cmd), driverIn, structBytes(&resp), driverOut); err != nil {
		return 0, err
	}
	return resp.Handle, nil
}

// DeallocPD destroys a PD with the PD_DESTROY ioctl.
func DeallocPD(f File, driverID uint32, handle uint32) error {
	c := NewIoctl(ObjectPD, MethodPDDestroy, driverID)
	c.InObj(AttrDestroyPDHandle, handle)
	return c.Exec(f, "ioctl PD_DESTROY")
}

// DeallocPDWrite destroys a PD with the legacy write DEALLOC_PD.
func DeallocPDWrite(f File, handle uint32) error {
	cmd := DeallocPDCmd{Handle: handle}
	return Write(f, CmdDeallocPD, structBytes(&cmd), nil, nil, nil)
}

// RegMRRequest is a memory registration: the user range [Start, Start+Length) becomes
// addressable at HCAVA through the returned keys, with Access (Access* flags) permissions.
type RegMRRequest struct {
	Start, Length, HCAVA uint64
	PD                   uint32
	Access               uint32
}

// MR is a registered memory region.
type MR struct {
	Handle, LKey, RKey uint32
}

// RegMR registers memory with the legacy write REG_MR. The memory must stay mapped while the
// MR exists; the kernel pins it.
func RegMR(f File, r RegMRRequest, driverIn, driverOut []byte) (MR, error) {
	cmd := RegMRCmd{Start: r.Start, Length: r.Length, Hca_va: r.HCAVA, Pd_handle: r.PD, Access_flags: r.Access}
	var resp RegMRResp
	if err := Write(f, CmdRegMR, structBytes(&cmd), driverIn, structBytes(&resp), driverOut); err != nil {
		return MR{}, err
	}
	return MR{Handle: resp.Handle, LKey: resp.Lkey, RKey: resp.Rkey}, nil
}

// DeregMR destroys an MR with the MR_DESTROY ioctl.
func DeregMR(f File, driverID uint32, handle uint32) error {
	c := NewIoctl(ObjectMR, MethodMRDestroy, driverID)
	c.InObj(AttrDestroyMRHandle, handle)
	return c.Exec(f, "ioctl MR_DESTROY")
}

// DeregMRWrite destroys an MR with the legacy write DEREG_MR.
func DeregMRWrite(f File, handle uint32) error {
	cmd := DeregMRCmd{Handle: handle}
	return Write(f, CmdDeregMR, structBytes(&cmd), nil, nil, nil)
}

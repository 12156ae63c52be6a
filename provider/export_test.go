package provider

// LiveBuffers exposes the mapped-Buffer count to the external tests' leak check.
func LiveBuffers() int64 { return liveBuffers.Load() }

// WriteOnlyCommands is the set of commands ctx sends as write() because the kernel answered
// their ioctl form as missing, by name.
func WriteOnlyCommands(ctx *Context) []string {
	names := [...]string{"get_context", "query_port", "create_cq", "destroy_cq", "create_qp", "destroy_qp", "dealloc_pd", "dereg_mr"}
	var out []string
	for i := range numIoctlCmds {
		if ctx.cmds.useWrite(i) {
			out = append(out, names[i])
		}
	}
	return out
}

// CQEVersion is the CQE version the kernel granted ctx.
func CQEVersion(ctx *Context) uint8 { return ctx.resp.CQEVersion }

// UserIndex is the CQE version 1 user index q was created with.
func UserIndex(q *QP) uint32 { return q.uidx }

// NoUserIndex is the uidx of QPs on CQE version 0 contexts.
const NoUserIndex = noUserIndex

// SetBeforeEventRead installs f between readEvent's poll and its read until the test ends.
func SetBeforeEventRead(t interface{ Cleanup(func()) }, f func(fd int)) {
	testHookBeforeEventRead = f
	t.Cleanup(func() { testHookBeforeEventRead = nil })
}

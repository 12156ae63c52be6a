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

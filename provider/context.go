package provider

// Context is an open device (struct ibv_context + struct mlx5_context).
type Context struct {
	lim queueLimits
}

// PD is a protection domain.
type PD struct {
	ctx    *Context
	handle uint32
}

// CompChannel is a completion event channel.
type CompChannel struct {
	ctx *Context
	fd  int
}

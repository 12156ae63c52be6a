package provider

// Accessors for the objects' parents, for layers (failover, fence) that wrap them.

// Context is the context the PD belongs to.
func (p *PD) Context() *Context { return p.ctx }

// PD is the protection domain the MR is registered in.
func (m *MR) PD() *PD { return m.pd }

// Context is the context the CQ belongs to.
func (c *CQ) Context() *Context { return c.ctx }

// Channel is the completion channel the CQ reports events to (nil for none).
func (c *CQ) Channel() *CompChannel { return c.channel }

// Context is the context the QP belongs to.
func (q *QP) Context() *Context { return q.ctx }

// PD is the QP's protection domain.
func (q *QP) PD() *PD { return q.pd }

// SendCQ is the CQ the QP's send completions go to.
func (q *QP) SendCQ() *CQ { return q.sendCQ }

// RecvCQ is the CQ the QP's receive completions go to.
func (q *QP) RecvCQ() *CQ { return q.recvCQ }

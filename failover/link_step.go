package failover

// stepLinks reads the link events waiting on Options.LinkEvents for a stepped context, which
// runs no watchLinks goroutine, and acts on each as that goroutine does (onLinkEvent). The
// simulation feeds the channel from the fabric's link changes inside its own step, so what
// Step finds there is the same on every run. It reports whether it read any.
func (c *Context) stepLinks() bool {
	read := false
	for c.stepLinkEvents != nil {
		select {
		case ev, ok := <-c.stepLinkEvents:
			if !ok {
				c.stepLinkEvents = nil // closed: no more events
				return read
			}
			read = true
			c.onLinkEvent(ev)
		default:
			return read
		}
	}
	return read
}

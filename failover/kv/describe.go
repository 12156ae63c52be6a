package kv

// The stores name themselves for the status files of the failover layer (shiftctl status):
// never with credentials.

// String is "mem".
func (m *Mem) String() string { return "mem" }

// String is "dir:" and the store's directory.
func (d *Dir) String() string { return "dir:" + d.root }

// String is the server's URL without its password.
func (r *Redis) String() string { return r.addr }

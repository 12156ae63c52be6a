package netnstest

// Created returns the names of every namespace New has made in this process.
func Created() []string {
	created.Lock()
	defer created.Unlock()
	return append([]string(nil), created.names...)
}

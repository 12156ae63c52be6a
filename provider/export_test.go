package provider

// LiveBuffers exposes the mapped-Buffer count to the external tests' leak check.
func LiveBuffers() int64 { return liveBuffers.Load() }

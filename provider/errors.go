package provider

import "fmt"

// Errors of this package wrap the sentinels of package verbs (verbs.ErrQPState,
// verbs.ErrSQFull, ...; test with errors.Is); a rejected post returns a *verbs.WRError naming
// the work request and the limit it exceeded. Control-path errors name the operation and wrap
// the uverbs error, which carries the kernel's errno.

// opError names a control-path operation and wraps the underlying error (often a uverbs
// error carrying the errno).
func opError(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("provider: %s: %w", op, err)
}

package main

import "errors"

// usageError marks an error in the command line (exit status 2) rather than in the
// operation (exit status 1).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func isUsageError(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

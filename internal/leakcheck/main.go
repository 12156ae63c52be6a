package leakcheck

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// Main runs m's tests and exits: with their code, or 1 when a passing run left goroutines,
// descriptors, mappings or anything an option checks behind, after printing what to
// standard error. Use it as the whole body of a TestMain.
func Main(m *testing.M, opts ...Option) {
	os.Exit(Run(m, opts...))
}

// Run is Main without the exit, for a TestMain that has more to do afterwards. Failing
// runs are not checked (their own failure is the report), nor fuzzing runs, whose engine
// keeps its own goroutines, pipes and shared memory.
func Run(m *testing.M, opts ...Option) int {
	s := Take(opts...)
	code := m.Run()
	if code != 0 || fuzzing() {
		return code
	}
	if err := s.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

func fuzzing() bool {
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		return true
	}
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		return true
	}
	return false
}

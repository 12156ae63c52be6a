package main

import (
	"os"
	"testing"
)

// TestMain lets a test start this binary as the shiftctl command (SHIFTCTL_TEST_MAIN=1), for
// instance as another user.
func TestMain(m *testing.M) {
	if os.Getenv("SHIFTCTL_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

package failover

import (
	"errors"
	"strings"
	"testing"

	"github.com/shift-rdma/shift/uverbs"
)

// TestOpenMissingDefault: a default device that does not exist is reported as such (once,
// with the devices there are), not as a missing backup.
func TestOpenMissingDefault(t *testing.T) {
	_, err := Open("nosuch-shift-dev", Options{Backups: []string{"another"}})
	if !errors.Is(err, uverbs.ErrNoDevice) || errors.Is(err, ErrNoBackup) {
		t.Fatalf("error %v: want ErrNoDevice, not ErrNoBackup", err)
	}
	if n := strings.Count(err.Error(), "nosuch-shift-dev"); n != 1 {
		t.Errorf("%q names the device %d times", err, n)
	}
}

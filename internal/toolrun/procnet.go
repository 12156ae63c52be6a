package toolrun

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Listening reports whether process pid has a TCP socket (IPv4 or IPv6) listening on port,
// from /proc/<pid>/net/tcp{,6}.
func Listening(pid, port int) bool {
	want := fmt.Sprintf(":%04X ", port)
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			// sl local_address rem_address st ...: st 0A is LISTEN
			if len(fs) > 3 && strings.HasSuffix(fs[1]+" ", want) && fs[3] == "0A" {
				return true
			}
		}
	}
	return false
}

// NetdevStats are the counters of /proc/net/dev for one interface.
type NetdevStats struct {
	RxBytes, RxPackets, TxBytes, TxPackets uint64
}

// ReadNetdev reads a /proc/.../net/dev file: the counters of every interface of the network
// namespace it belongs to (/proc/<pid>/net/dev: pid's; /proc/thread-self/net/dev: the
// calling thread's).
func ReadNetdev(path string) (map[string]NetdevStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]NetdevStats{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(rest)
		if len(fs) < 10 {
			continue
		}
		var v [10]uint64
		for i := range v {
			v[i], _ = strconv.ParseUint(fs[i], 10, 64)
		}
		out[strings.TrimSpace(name)] = NetdevStats{RxBytes: v[0], RxPackets: v[1], TxBytes: v[8], TxPackets: v[9]}
	}
	return out, sc.Err()
}

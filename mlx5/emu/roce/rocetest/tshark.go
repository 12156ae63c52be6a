// Package rocetest holds test helpers for RoCEv2 traffic: decoding captures with tshark, the
// external oracle for the wire format.
package rocetest

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Fields is the list of tshark fields Decode extracts, in column order.
var Fields = []string{
	"frame.protocols",
	"infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.m", "infiniband.bth.padcnt",
	"infiniband.bth.tver", "infiniband.bth.p_key", "infiniband.bth.destqp", "infiniband.bth.a",
	"infiniband.bth.psn",
	"infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
	"infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
	"infiniband.aeth.syndrome", "infiniband.aeth.msn",
	"infiniband.atomicacketh.origremdt",
	"infiniband.immdt",
	"data.data",
	"infiniband.invariant.crc",
	"_ws.malformed", "_ws.expert.severity",
	"ip.checksum.status", "udp.checksum.status",
	"udp.srcport", "udp.dstport", "ip.src", "ipv6.src",
}

// Frame is one decoded frame: field name to its values joined by commas ("" when absent).
type Frame map[string]string

// First is the first value of a field ("" when absent).
func (f Frame) First(name string) string {
	s, _, _ := strings.Cut(f[name], ",")
	return s
}

// Uint parses a numeric field written in decimal or 0x-hex; absent fields are an error.
func (f Frame) Uint(name string) (uint64, error) {
	s := f.First(name)
	if s == "" {
		return 0, fmt.Errorf("field %s absent", name)
	}
	return strconv.ParseUint(s, 0, 64)
}

// Bool parses a boolean field ("1"/"True" or "0"/"False").
func (f Frame) Bool(name string) bool {
	s := f.First(name)
	return s == "1" || strings.EqualFold(s, "true")
}

// Malformed reports why tshark found the frame malformed or raised an error-level expert
// item, or "" when it did not.
func (f Frame) Malformed() string {
	if f["_ws.malformed"] != "" {
		return "malformed: " + f["_ws.malformed"]
	}
	for _, s := range strings.Split(f["_ws.expert.severity"], ",") {
		// Wireshark's PI_ERROR is 0x00800000; errors and above mean a broken packet.
		if v, err := strconv.ParseUint(s, 0, 32); err == nil && v >= 0x00800000 {
			return "expert severity " + s
		}
	}
	return ""
}

// payloadHeuristics are the protocols Wireshark tries on InfiniBand payloads (tshark -G
// heuristic-decodes, table infiniband.payload). Emulator payloads are opaque application
// bytes, so they are switched off: otherwise RPC-over-RDMA claims random SEND data and
// reports it malformed.
var payloadHeuristics = []string{"rpcordma", "smc", "smb_direct", "nvme-rdma", "lnet", "iser", "infiniband_sdp", "fcoib", "infiniband.eoib"}

// HaveTshark reports whether tshark is installed.
func HaveTshark() bool {
	_, err := exec.LookPath("tshark")
	return err == nil
}

// Decode runs tshark on a pcap file and returns one Frame per packet. With checksums, tshark
// verifies IPv4 and UDP checksums (ip/udp.checksum.status 1 good, 0 bad); leave it off for
// captures of a sending host, whose UDP checksums are left to offload and read as partial.
// It skips the test when tshark is not installed.
func Decode(t testing.TB, pcap string, checksums bool) []Frame {
	t.Helper()
	path, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark is not installed (Debian package tshark): the wire-format oracle cannot run")
	}
	check := "FALSE"
	if checksums {
		check = "TRUE"
	}
	args := []string{"-r", pcap, "-n", "-o", "udp.check_checksum:" + check, "-o", "ip.check_checksum:" + check,
		"-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,"}
	for _, p := range payloadHeuristics {
		args = append(args, "--disable-protocol", p)
	}
	for _, f := range Fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(path, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("tshark %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		t.Fatalf("tshark: %v", err)
	}
	var out []Frame
	for line := range strings.Lines(stdout.String()) {
		cols := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(cols) != len(Fields) {
			t.Fatalf("tshark line has %d columns, want %d: %q", len(cols), len(Fields), line)
		}
		f := Frame{}
		for i, name := range Fields {
			f[name] = cols[i]
		}
		out = append(out, f)
	}
	return out
}

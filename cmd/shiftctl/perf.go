package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/shift-rdma/shift/internal/shiftenv"
	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
	"golang.org/x/sys/unix"
)

// perfGuard bounds how long a test waits without progress before it gives up.
const perfGuard = 30 * time.Second

// perfConfig holds the perftest-like options.
type perfConfig struct {
	dev      string
	gidIdx   int
	ibPort   int
	size     int
	iters    int
	qps      int
	depth    int
	inline   int
	test     string // write, send, read
	lat      bool
	tcpPort  int
	server   string // host to connect to; "" = act as server
	emulated bool
	emuIP    string // run on an emulated device of this process bound to this IP (RoCEv2 over UDP)
	verify   bool
	timeout  int // QP ACK timeout exponent
}

// errHelp reports that -h was given and the usage printed.
var errHelp = flag.ErrHelp

func parsePerf(args []string) (perfConfig, error) { return parsePerfTo(args, io.Discard) }

func parsePerfTo(args []string, usage io.Writer) (perfConfig, error) {
	var c perfConfig
	fs := flag.NewFlagSet("perf", flag.ContinueOnError)
	fs.SetOutput(usage)
	fs.Usage = func() {
		fmt.Fprintln(usage, "usage: shiftctl perf [flags] [server-host]   (no host: act as the server)")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.dev, "d", "", "device name (default: the first device)")
	fs.IntVar(&c.gidIdx, "x", 0, "source GID index")
	fs.IntVar(&c.ibPort, "i", 1, "device port")
	fs.IntVar(&c.size, "s", 0, "message size in bytes, 1..2^30 (default 2 for latency, 65536 for bandwidth)")
	fs.IntVar(&c.iters, "n", 0, "iterations, at least 1 (default 1000 for latency, 5000 for bandwidth)")
	fs.IntVar(&c.qps, "q", 1, "number of QPs (bandwidth tests)")
	fs.IntVar(&c.depth, "t", 128, "send queue depth (outstanding WRs per QP)")
	fs.IntVar(&c.inline, "I", -1, "max inline size (default 220 for latency, 0 for bandwidth)")
	fs.StringVar(&c.test, "test", "write", "operation: write, send or read")
	fs.BoolVar(&c.lat, "lat", false, "latency test (default: bandwidth)")
	fs.IntVar(&c.tcpPort, "p", 18515, "TCP port of the out-of-band exchange")
	fs.BoolVar(&c.emulated, "emulated", false, "run client and server in-process over two emulated hosts")
	fs.StringVar(&c.emuIP, "emu-ip", "", "run on an emulated device of this process whose RoCEv2 port binds this local IP (UDP 4791), talking to another process's emulated device started the same way (-d is then ignored)")
	fs.BoolVar(&c.verify, "verify", true, "check the transferred data at the end")
	fs.IntVar(&c.timeout, "u", 14, "QP ACK timeout exponent (4.096 us * 2^u)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 1 {
		return c, fmt.Errorf("at most one server host, got %v", fs.Args())
	}
	c.server = fs.Arg(0)
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	switch c.test {
	case "write", "send", "read":
	default:
		return c, fmt.Errorf("-test %q: want write, send or read", c.test)
	}
	if !given["s"] {
		c.size = 65536
		if c.lat {
			c.size = 2
		}
	}
	if !given["n"] {
		c.iters = 5000
		if c.lat {
			c.iters = 1000
		}
	}
	if c.inline < 0 {
		c.inline = 0
		if c.lat {
			c.inline = 220
		}
	}
	for _, r := range []struct {
		flag      string
		v, lo, hi int
	}{{"-s", c.size, 1, 1 << 30}, {"-n", c.iters, 1, 1 << 30}, {"-q", c.qps, 1, 64}, {"-t", c.depth, 1, 8192},
		{"-i", c.ibPort, 1, 255}, {"-x", c.gidIdx, 0, 255}, {"-u", c.timeout, 0, 31}, {"-p", c.tcpPort, 1, 65535}} {
		if r.v < r.lo || r.v > r.hi {
			return c, fmt.Errorf("%s %d: out of range, want %d..%d: %w", r.flag, r.v, r.lo, r.hi, unix.EINVAL)
		}
	}
	if c.lat && c.qps != 1 {
		return c, errors.New("latency tests use one QP (-q 1)")
	}
	return c, nil
}

func perfMain(args []string, out io.Writer) error {
	c, err := parsePerfTo(args, out)
	if errors.Is(err, errHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if c.emulated {
		if c.dev != "" || c.emuIP != "" {
			return errors.New("-emulated creates its own two devices: it takes neither -d nor -emu-ip")
		}
		return runEmulated(c, out)
	}
	if c.emuIP != "" {
		name, closeDev, err := openUDPDevice(c.emuIP)
		if err != nil {
			return err
		}
		defer closeDev()
		c.dev = name
	}
	if c.dev == "" {
		devs, err := provider.Devices()
		if err != nil {
			return err
		}
		if len(devs) == 0 {
			return errors.New("no RDMA device found (use -emulated to run on the emulator)")
		}
		c.dev = devs[0].Name
	}
	if c.server == "" {
		// The device first: a server on a device that cannot be opened fails at once
		// instead of waiting for a client.
		s, err := newPerfSide(c)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(c.tcpPort))
		if err != nil {
			s.close()
			return err
		}
		defer ln.Close()
		conn, err := ln.Accept()
		if err != nil {
			s.close()
			return err
		}
		defer conn.Close()
		_, err = runOpenSide(s, conn, false, out)
		return err
	}
	conn, err := net.Dial("tcp", net.JoinHostPort(c.server, strconv.Itoa(c.tcpPort)))
	if err != nil {
		return err
	}
	defer conn.Close()
	res, err := runSide(c, conn, true, out)
	if err != nil {
		return err
	}
	res.print(out)
	return nil
}

// qpInfo is one QP's record in the out-of-band exchange.
type qpInfo struct {
	QPN     uint32
	PSN     uint32
	GID     [16]byte
	DstAddr uint64 // where the peer's WRITEs land
	SrcAddr uint64 // where the peer's READs read from
	RKey    uint32
}

// perfSide is one end: a context with one CQ, qps QPs and a registered buffer with two
// slots per QP: the destination of incoming data (WRITE, SEND, READ responses) and the source
// of outgoing data.
type perfSide struct {
	c      perfConfig
	ctx    *provider.Context
	pd     verbs.PD
	cq     verbs.CQ
	qps    []verbs.QP
	buf    *provider.Buffer
	mr     verbs.MR
	slot   int
	remote []qpInfo
}

func newPerfSide(c perfConfig) (*perfSide, error) {
	s := &perfSide{c: c, slot: (c.size + 63) &^ 63}
	po, err := shiftenv.ProviderOptions(os.Getenv) // libmlx5's variables, as perftest's
	if err != nil {
		return nil, err
	}
	if s.ctx, err = provider.OpenWith(c.dev, po); err != nil {
		return nil, err
	}
	fail := func(err error) (*perfSide, error) { s.close(); return nil, err }
	if s.pd, err = s.ctx.AllocPD(); err != nil {
		return fail(err)
	}
	if s.cq, err = s.ctx.CreateCQ(verbs.CQInitAttr{CQE: c.qps * c.depth * 2}); err != nil {
		return fail(err)
	}
	for range c.qps {
		qp, err := s.pd.CreateQP(verbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, Cap: verbs.QPCap{
			MaxSendWR: uint32(c.depth), MaxRecvWR: uint32(c.depth), MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: uint32(c.inline)}})
		if err != nil {
			return fail(err)
		}
		s.qps = append(s.qps, qp)
	}
	if s.buf, err = provider.NewBuffer(2 * s.slot * c.qps); err != nil {
		return fail(err)
	}
	if s.mr, err = s.pd.RegMR(s.buf.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead); err != nil {
		return fail(err)
	}
	return s, nil
}

func (s *perfSide) close() {
	for _, q := range s.qps {
		q.Destroy()
	}
	if s.mr != nil {
		s.mr.Dereg()
	}
	if s.cq != nil {
		s.cq.Destroy()
	}
	if s.pd != nil {
		s.pd.Dealloc()
	}
	if s.buf != nil {
		s.buf.Free()
	}
	if s.ctx != nil {
		s.ctx.Close()
	}
}

// connect exchanges QP records over conn and brings every QP to RTS.
func (s *perfSide) connect(conn net.Conn, client bool) error {
	g, err := s.ctx.GIDByIndex(uint8(s.c.ibPort), s.c.gidIdx)
	if err != nil {
		return err
	}
	pa, err := s.ctx.QueryPort(uint8(s.c.ibPort))
	if err != nil {
		return err
	}
	local := make([]qpInfo, len(s.qps))
	for i, q := range s.qps {
		local[i] = qpInfo{QPN: q.QPN(), PSN: rand.Uint32() & 0xffffff, GID: g.GID,
			DstAddr: s.mr.Addr() + uint64(2*i*s.slot), SrcAddr: s.mr.Addr() + uint64((2*i+1)*s.slot), RKey: s.mr.RKey()}
	}
	if client {
		if err := writeMsg(conn, local); err != nil {
			return err
		}
		if err := readMsg(conn, &s.remote); err != nil {
			return err
		}
	} else {
		if err := readMsg(conn, &s.remote); err != nil {
			return err
		}
		if err := writeMsg(conn, local); err != nil {
			return err
		}
	}
	if len(s.remote) != len(s.qps) {
		return fmt.Errorf("peer has %d QPs, this side %d", len(s.remote), len(s.qps))
	}
	attr := verbs.ConnectAttr{Port: uint8(s.c.ibPort), GIDIndex: uint8(s.c.gidIdx), PathMTU: pa.ActiveMTU, Timeout: uint8(s.c.timeout)}
	for i, q := range s.qps {
		r := s.remote[i]
		if err := verbs.Connect(q, attr, verbs.Endpoint{QPN: local[i].QPN, PSN: local[i].PSN},
			verbs.Endpoint{QPN: r.QPN, PSN: r.PSN, GID: r.GID}); err != nil {
			return err
		}
	}
	return nil
}

// writeMsg and readMsg carry one JSON message with a 4-byte length prefix, reading exactly
// its bytes so nothing of the following barrier bytes is consumed.
func writeMsg(conn net.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	_, err = conn.Write(append(n[:], b...))
	return err
}

func readMsg(conn net.Conn, v any) error {
	var n [4]byte
	if _, err := io.ReadFull(conn, n[:]); err != nil {
		return err
	}
	l := binary.BigEndian.Uint32(n[:])
	if l > 1<<20 {
		return fmt.Errorf("exchange message of %d bytes", l)
	}
	b := make([]byte, l)
	if _, err := io.ReadFull(conn, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// barrier exchanges one byte each way.
func barrier(conn net.Conn) error {
	if _, err := conn.Write([]byte{1}); err != nil {
		return err
	}
	var b [1]byte
	_, err := io.ReadFull(conn, b[:])
	return err
}

// pattern fills the slot of QP i deterministically so the receiver can check it.
func pattern(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// runSide runs one end of the test over an established TCP connection; the client returns
// the measured result.
func runSide(c perfConfig, conn net.Conn, client bool, out io.Writer) (*perfResult, error) {
	s, err := newPerfSide(c)
	if err != nil {
		return nil, err
	}
	return runOpenSide(s, conn, client, out)
}

// runOpenSide is runSide on a side already open; it closes it.
func runOpenSide(s *perfSide, conn net.Conn, client bool, out io.Writer) (*perfResult, error) {
	c := s.c
	defer s.close()
	// The side the data comes from fills its source slots: the client for write and send,
	// the server for read.
	if client == (c.test != "read") {
		for i := range s.qps {
			pattern(s.src(i), uint64(i+1))
		}
	}
	if err := s.connect(conn, client); err != nil {
		return nil, err
	}
	var res *perfResult
	var err error
	if c.lat {
		res, err = s.latency(conn, client)
	} else {
		res, err = s.bandwidth(conn, client)
	}
	if err != nil {
		return nil, err
	}
	if c.verify && !c.lat && !client == (c.test != "read") {
		want := make([]byte, s.slot)
		for i := range s.qps {
			pattern(want[:c.size], uint64(i+1))
			if string(s.dst(i)) != string(want[:c.size]) {
				return nil, fmt.Errorf("data check failed on QP %d: the %s payload differs", i, c.test)
			}
		}
		if res != nil {
			res.verified = true
		} else {
			fmt.Fprintf(out, "server: %d bytes x %d QPs verified\n", c.size, len(s.qps))
		}
	}
	if !client {
		// Tell the client the data check is over before the QPs go away.
		return res, barrier(conn)
	}
	return res, barrier(conn)
}

// dst and src are the two slots of QP i; dstSGE and srcSGE their scatter/gather entries.
func (s *perfSide) dst(i int) []byte { return s.buf.Bytes()[2*i*s.slot : 2*i*s.slot+s.c.size] }

func (s *perfSide) src(i int) []byte {
	return s.buf.Bytes()[(2*i+1)*s.slot : (2*i+1)*s.slot+s.c.size]
}

func (s *perfSide) dstSGE(i int) verbs.SGE { return s.mr.SGE(2*i*s.slot, s.c.size) }

func (s *perfSide) srcSGE(i int) verbs.SGE { return s.mr.SGE((2*i+1)*s.slot, s.c.size) }

// waitOne polls until one completion arrives and checks it succeeded.
func (s *perfSide) waitOne(wc []verbs.WC, deadline time.Time) (verbs.WC, error) {
	for n := 0; ; n++ {
		k, err := s.cq.Poll(wc[:1])
		if err != nil {
			return verbs.WC{}, err
		}
		if k == 1 {
			if wc[0].Status != verbs.WCSuccess {
				return wc[0], fmt.Errorf("completion wr_id %d: %v", wc[0].WRID, wc[0].Status)
			}
			return wc[0], nil
		}
		s.idle()
		if n&1023 == 1023 && time.Now().After(deadline) {
			return verbs.WC{}, errors.New("timed out waiting for a completion")
		}
	}
}

// bandwidth: the client streams iters WRs round-robin over its QPs, at most depth
// outstanding per QP; send_bw servers keep depth receives posted per QP.
func (s *perfSide) bandwidth(conn net.Conn, client bool) (*perfResult, error) {
	c := s.c
	deadline := time.Now().Add(perfGuard)
	var wc [64]verbs.WC
	recvTotal := 0
	if !client && c.test == "send" {
		for i, q := range s.qps {
			rw := []verbs.RecvWR{{WRID: uint64(i), SGL: []verbs.SGE{s.dstSGE(i)}}}
			for range c.depth {
				if err := q.PostRecv(rw); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := barrier(conn); err != nil {
		return nil, err
	}
	if !client {
		if c.test == "send" {
			for recvTotal < c.iters {
				k, err := s.cq.Poll(wc[:])
				if err != nil {
					return nil, err
				}
				for _, w := range wc[:k] {
					if w.Status != verbs.WCSuccess {
						return nil, fmt.Errorf("receive completion: %v", w.Status)
					}
					recvTotal++
					i := int(w.WRID)
					if err := s.qps[i].PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGL: []verbs.SGE{s.dstSGE(i)}}}); err != nil {
						return nil, err
					}
				}
				if k == 0 {
					s.idle()
					if time.Now().After(deadline) {
						return nil, errors.New("timed out receiving")
					}
				} else {
					deadline = time.Now().Add(perfGuard)
				}
			}
		}
		// Wait for the client's end-of-test marker.
		return nil, barrier(conn)
	}
	op := verbs.WRRDMAWrite
	switch c.test {
	case "send":
		op = verbs.WRSend
	case "read":
		op = verbs.WRRDMARead
	}
	flags := verbs.SendSignaled
	if c.size <= c.inline && op != verbs.WRRDMARead {
		flags |= verbs.SendInline
	}
	outstanding := make([]int, len(s.qps))
	wr := make([]verbs.SendWR, 1)
	posted, done := 0, 0
	start := time.Now()
	for done < c.iters {
		for i, q := range s.qps {
			if posted == c.iters || outstanding[i] == c.depth {
				continue
			}
			r := s.remote[i]
			wr[0] = verbs.SendWR{WRID: uint64(i), Opcode: op, Flags: flags, SGL: []verbs.SGE{s.srcSGE(i)}, RemoteAddr: r.DstAddr, RKey: r.RKey}
			if op == verbs.WRRDMARead {
				wr[0].SGL[0], wr[0].RemoteAddr = s.dstSGE(i), r.SrcAddr
			}
			if err := q.PostSend(wr); err != nil {
				return nil, err
			}
			outstanding[i]++
			posted++
		}
		k, err := s.cq.Poll(wc[:])
		if err != nil {
			return nil, err
		}
		for _, w := range wc[:k] {
			if w.Status != verbs.WCSuccess {
				return nil, fmt.Errorf("completion on QP %d: %v", w.WRID, w.Status)
			}
			outstanding[w.WRID]--
			done++
		}
		if k == 0 {
			s.idle()
			if time.Now().After(deadline) {
				return nil, errors.New("timed out")
			}
		} else {
			deadline = time.Now().Add(perfGuard)
		}
	}
	el := time.Since(start)
	if err := barrier(conn); err != nil {
		return nil, err
	}
	return &perfResult{c: c, elapsed: el}, nil
}

// latency: write and send are ping-pongs (half the round trip is reported, as perftest
// does); read times each RDMA READ until its completion.
func (s *perfSide) latency(conn net.Conn, client bool) (*perfResult, error) {
	c := s.c
	q, r := s.qps[0], s.remote[0]
	deadline := time.Now().Add(perfGuard)
	var wc [4]verbs.WC
	samples := make([]time.Duration, 0, c.iters)
	flags := verbs.SendSignaled
	if c.size <= c.inline && c.test != "read" {
		flags |= verbs.SendInline
	}
	buf := s.src(0)
	// The last byte of the message carries the iteration number for write ping-pong; it is
	// watched in the destination slot through an atomic load of its aligned 4-byte word,
	// since the NIC writes it.
	flagOff := (c.size - 1) &^ 3
	flagWord := (*uint32)(unsafe.Pointer(&s.buf.Bytes()[flagOff]))
	flagShift := uint(8 * ((c.size - 1) & 3)) // little-endian byte position inside the word
	// pending counts our own signaled WRITEs not yet reaped; waitFlag reaps them while it
	// waits, so an error completion (the peer is gone, the link failed) ends the test at once
	// instead of leaving it waiting for a WRITE that will never come.
	pending := 0
	reap := func() error {
		k, err := s.cq.Poll(wc[:])
		if err != nil {
			return err
		}
		for _, w := range wc[:k] {
			if w.Status != verbs.WCSuccess {
				return fmt.Errorf("completion wr_id %d: %v", w.WRID, w.Status)
			}
			pending--
		}
		return nil
	}
	waitFlag := func(v byte) error {
		for n := 0; ; n++ {
			if byte(atomic.LoadUint32(flagWord)>>flagShift) == v {
				return nil
			}
			if err := reap(); err != nil {
				return err
			}
			s.idle()
			if n&4095 == 4095 && time.Now().After(deadline) {
				return errors.New("timed out waiting for the peer's write")
			}
		}
	}
	send := func(op verbs.WROpcode, i int) error {
		buf[c.size-1] = byte(i)
		return q.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: op, Flags: flags, SGL: []verbs.SGE{s.srcSGE(0)}, RemoteAddr: r.DstAddr, RKey: r.RKey}})
	}
	recv := []verbs.RecvWR{{SGL: []verbs.SGE{s.dstSGE(0)}}}
	if c.test == "send" {
		if err := q.PostRecv(recv); err != nil {
			return nil, err
		}
	}
	if err := barrier(conn); err != nil {
		return nil, err
	}
	if c.test == "read" {
		if client {
			for i := 0; i < c.iters; i++ {
				deadline = time.Now().Add(perfGuard)
				t0 := time.Now()
				if err := q.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
					SGL: []verbs.SGE{s.dstSGE(0)}, RemoteAddr: r.SrcAddr, RKey: r.RKey}}); err != nil {
					return nil, err
				}
				if _, err := s.waitOne(wc[:], deadline); err != nil {
					return nil, err
				}
				samples = append(samples, time.Since(t0))
			}
		}
		if err := barrier(conn); err != nil {
			return nil, err
		}
		if !client {
			return nil, nil
		}
		return &perfResult{c: c, samples: samples}, nil
	}
	for i := 1; i <= c.iters; i++ {
		deadline = time.Now().Add(perfGuard)
		var t0 time.Time
		if client {
			t0 = time.Now()
			if err := s.ping(send, i); err != nil {
				return nil, err
			}
		}
		// Wait for the peer's message.
		if c.test == "write" {
			if err := waitFlag(byte(i)); err != nil {
				return nil, err
			}
		} else {
			for {
				w, err := s.waitOne(wc[:], deadline)
				if err != nil {
					return nil, err
				}
				if w.Opcode == verbs.WCRecv {
					break
				}
			}
			if err := q.PostRecv(recv); err != nil {
				return nil, err
			}
		}
		if client {
			samples = append(samples, time.Since(t0)/2)
		} else if err := s.ping(send, i); err != nil {
			return nil, err
		}
		if c.test == "write" {
			pending++
			// Keep the SQ from filling: reap down to half the depth.
			for pending > c.depth/2 {
				if _, err := s.waitOne(wc[:], deadline); err != nil {
					return nil, err
				}
				pending--
			}
		}
	}
	for c.test == "write" && pending > 0 {
		if _, err := s.waitOne(wc[:], deadline); err != nil {
			return nil, err
		}
		pending--
	}
	if c.test == "send" {
		// Completions of our sends may still be queued behind receives; drain them.
		for {
			k, err := s.cq.Poll(wc[:])
			if err != nil || k == 0 {
				break
			}
		}
	}
	if err := barrier(conn); err != nil {
		return nil, err
	}
	if !client {
		return nil, nil
	}
	return &perfResult{c: c, samples: samples}, nil
}

// idle is called on every empty poll. On the emulator the NIC runs as goroutines of this
// process, so a spinning poller yields the processor to them; on hardware it keeps spinning.
func (s *perfSide) idle() {
	if s.c.emulated || s.c.emuIP != "" {
		runtime.Gosched()
	}
}

func (s *perfSide) ping(send func(verbs.WROpcode, int) error, i int) error {
	if s.c.test == "write" {
		return send(verbs.WRRDMAWrite, i)
	}
	return send(verbs.WRSend, i)
}

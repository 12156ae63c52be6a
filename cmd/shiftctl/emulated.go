package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/shift-rdma/shift/mlx5/emu"
)

// runEmulated builds two emulated hosts on an in-process fabric, registers their devices,
// and runs the server on host 1 and the client on host 0, exchanging QP records over TCP on
// loopback exactly as two processes would.
func runEmulated(c perfConfig, out io.Writer) error {
	prefix := fmt.Sprintf("perf%d_", os.Getpid())
	cl, err := emu.NewCluster(emu.ClusterConfig{Hosts: 2, Register: true, Prefix: prefix})
	if err != nil {
		return err
	}
	defer cl.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	srvCfg, cliCfg := c, c
	srvCfg.dev, cliCfg.dev = prefix+"1", prefix+"0"
	srvErr := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer conn.Close()
		_, err = runSide(srvCfg, conn, false, out)
		srvErr <- err
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	res, cerr := runSide(cliCfg, conn, true, out)
	conn.Close()
	serr := <-srvErr
	if err := errors.Join(cerr, serr); err != nil {
		return err
	}
	fmt.Fprintf(out, " emulated: client %s, server %s\n", cliCfg.dev, srvCfg.dev)
	res.print(out)
	return nil
}

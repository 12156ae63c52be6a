package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/shift-rdma/shift/mlx5/emu"
	"github.com/shift-rdma/shift/mlx5/emu/fabric"
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

// openUDPDevice creates and registers an emulated HCA of this process whose single port is a
// RoCEv2 link on ip (UDP port 4791): two shiftctl processes, each with its own, exchange real
// RoCEv2 datagrams through the kernel. It returns the device name and a cleanup function.
func openUDPDevice(ip string) (string, func(), error) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return "", nil, fmt.Errorf("-emu-ip %q: %w", ip, err)
	}
	link, err := fabric.ListenUDP(addr)
	if err != nil {
		return "", nil, err
	}
	name := "eudp_" + strings.NewReplacer(".", "_", ":", "_").Replace(addr.String())
	d, err := emu.NewDevice(emu.DeviceConfig{Name: name, Ports: []emu.PortConfig{{Link: link, Netdev: "lo"}}})
	if err != nil {
		link.Close()
		return "", nil, err
	}
	un, err := d.Register()
	if err != nil {
		d.Close()
		link.Close()
		return "", nil, err
	}
	return name, func() {
		un()
		d.Close()
		link.Close() // the device does not own its link
	}, nil
}

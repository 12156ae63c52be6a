package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/shift-rdma/shift/failover"
)

func (r *statusReport) writeJSON(w io.Writer) error {
	if r.Devices == nil {
		r.Devices = []deviceStatus{}
	}
	if r.Netdevs == nil {
		r.Netdevs = []netdevStatus{}
	}
	if r.Shift.Processes == nil {
		r.Shift.Processes = []failover.ProcessStatus{}
	}
	if r.Shift.Dirs == nil {
		r.Shift.Dirs = []string{}
	}
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// writeTable prints the tables of the devices (ports, GIDs, netdevs), then those of the
// SHIFT processes.
func (r *statusReport) writeTable(w io.Writer) error {
	if err := r.writeDevices(w); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	return r.Shift.writeTable(w)
}

// writeDevices prints three tables: ports, GIDs, netdevs.
func (r *statusReport) writeDevices(w io.Writer) error {
	if len(r.Devices) == 0 {
		_, err := fmt.Fprintf(w, "no RDMA devices (none under %s/class/infiniband_verbs, none emulated in this process)\n", r.SysfsRoot)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tUVERBS\tPORT\tSTATE\tPHYS\tMTU\tLINK\tNETDEV")
	for _, d := range r.Devices {
		uv := d.Uverbs
		if d.Emulated {
			uv = "emulated"
		}
		if len(d.Ports) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\n", d.Name, dash(uv))
		}
		for _, p := range d.Ports {
			mtu := "-"
			if p.ActiveMTU > 0 {
				mtu = strconv.Itoa(p.ActiveMTU)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", d.Name, dash(uv), p.Num, dash(p.State),
				dash(p.PhysState), mtu, dash(p.LinkLayer), dash(p.Netdev))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, d := range r.Devices {
		if d.QueryError != "" {
			fmt.Fprintf(w, "%s: not queried (port state from discovery, MTU unknown): %s\n", d.Name, d.QueryError)
		}
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tPORT\tINDEX\tGID\tTYPE\tNETDEV")
	for _, d := range r.Devices {
		for _, p := range d.Ports {
			for _, g := range p.GIDs {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", d.Name, p.Num, g.Index, g.GID, dash(g.Type), dash(g.Netdev))
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NETDEV\tOPERSTATE\tCARRIER\tCARRIER_DOWN_COUNT\tMTU")
	for _, n := range r.Netdevs {
		if !n.Present {
			note := "not in sysfs (emulated)"
			if n.Error != "" {
				note = n.Error
			}
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\n", n.Name, note)
			continue
		}
		carrier, cdc, mtu := "-", "-", "-"
		if n.Carrier != nil {
			carrier = strconv.Itoa(*n.Carrier)
		}
		if n.CarrierDownCount != nil {
			cdc = strconv.FormatUint(*n.CarrierDownCount, 10)
		}
		if n.MTU > 0 {
			mtu = strconv.Itoa(n.MTU)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Name, dash(n.OperState), carrier, cdc, mtu)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range r.Netdevs {
		if n.Present && n.Error != "" {
			fmt.Fprintf(w, "%s: %s\n", n.Name, n.Error)
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// writeTable prints the SHIFT processes (one row per context) and their QPs.
func (r *processReport) writeTable(w io.Writer) error {
	if len(r.Processes) == 0 {
		where := strings.Join(r.Dirs, ", ")
		if where == "" {
			where = "no runtime directory yet"
		}
		if _, err := fmt.Fprintf(w, "no SHIFT processes (no status file in %s)\n", where); err != nil {
			return err
		}
		return r.writeErrors(w)
	}
	if _, err := fmt.Fprintf(w, "SHIFT processes (status files in %s):\n", strings.Join(r.Dirs, ", ")); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tCOMMAND\tDEVICE\tBACKUPS\tJOB\tKV\tLINK_WATCH\tQPS\tFALLBACKS\tRECOVERIES\tUPDATED")
	for _, p := range r.Processes {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", p.PID, dash(p.Command), p.Device,
			dash(strings.Join(p.Backups, ",")), dash(p.Job), dash(p.KV), dash(p.LinkWatch), len(p.QPs),
			p.Counters.Fallbacks, p.Counters.Recoveries, p.Updated.Format("15:04:05.000"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tDEVICE\tQPN\tSEND\tRECV\tROUND\tPIN\tNIC\tBACKUP_QPN\tREADY\tFALLBACKS\tRECOVERIES\tREPOSTED\tREFUSED\tPROBES\tON_BACKUP\tLAST_EVENT")
	rows := 0
	for _, p := range r.Processes {
		for _, q := range p.QPs {
			rows++
			bq := "-"
			if q.BackupQPN != 0 {
				bq = fmt.Sprintf("%#x", q.BackupQPN)
			}
			last := "-"
			if q.LastEvent != "" {
				last = q.LastEvent + "@" + q.LastEventTime.Format("15:04:05.000")
			}
			onBackup := time.Duration(q.TimeOnBackup * float64(time.Second)).Round(time.Millisecond)
			fmt.Fprintf(tw, "%d\t%s\t%#x\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%v\t%s\n", p.PID, p.Device, q.QPN,
				q.SendState, q.RecvState, dash(q.Round), dash(q.Pin), dash(q.NIC), bq, strconv.FormatBool(q.BackupReady), q.Fallbacks,
				q.Recoveries, q.Reposted, q.Refused, q.Probes, onBackup, last)
		}
	}
	if rows == 0 {
		fmt.Fprintln(tw, "(no QPs)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return r.writeErrors(w)
}

func (r *processReport) writeErrors(w io.Writer) error {
	for _, e := range r.Errors {
		if _, err := fmt.Fprintf(w, "status files: %s\n", e); err != nil {
			return err
		}
	}
	return nil
}

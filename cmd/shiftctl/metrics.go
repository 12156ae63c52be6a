package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/failover"
)

const metricsUsage = `  metrics -listen ADDR [-sysfs ROOT]
         serve the SHIFT processes' status (the data of shiftctl status: QP states,
         fallbacks, recoveries, reposted WRs, time on the backup, ...) and the ports' and
         netdevs' state and counters in the Prometheus text format on http://ADDR/metrics,
         read at each scrape; prints the address it listens on (ADDR may be 127.0.0.1:0)
         and serves until interrupted (metric names: docs/OPERATIONS.md)
    -listen ADDR the TCP address to listen on, host:port
    -sysfs ROOT  as for status`

// metricsMain serves until ctx ends (main: SIGINT or SIGTERM).
func metricsMain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("metrics", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	listen := fs.String("listen", "", "")
	root := fs.String("sysfs", "", "")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		_, err = fmt.Fprintln(stdout, metricsUsage)
		return err
	} else if err != nil {
		return usageError{fmt.Errorf("%w\n%s", err, metricsUsage)}
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("unexpected argument %q: %w\n%s", fs.Arg(0), unix.EINVAL, metricsUsage)}
	}
	if *listen == "" {
		return usageError{fmt.Errorf("-listen ADDR required: %w\n%s", unix.EINVAL, metricsUsage)}
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(newShiftCollector(*root, os.Getenv)); err != nil {
		return fmt.Errorf("register the collector: %w", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if _, err := fmt.Fprintf(stdout, "serving metrics on http://%s/metrics\n", ln.Addr()); err != nil {
		ln.Close()
		return err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-done // http.ErrServerClosed
	return err
}

// shiftCollector reads the status files and the ports and netdevs at each scrape.
type shiftCollector struct {
	root   string
	getenv func(string) string
	d      metricDescs
}

// metricDescs are the metrics, named as Prometheus names them: base units (seconds, bytes),
// _total for counters, _info for labels with the constant value 1.
type metricDescs struct {
	procInfo, procUpdated, procInterval                                 *prometheus.Desc
	ctxFallbacks, ctxRefused, ctxReposted, ctxRecoveries, ctxProbes     *prometheus.Desc
	ctxProbeFailures, ctxLinkEvents, ctxTransitions                     *prometheus.Desc
	ctxAppErrors, ctxChains, ctxAsyncEvents, ctxEventFallbacks          *prometheus.Desc
	ctxAppStops                                                         *prometheus.Desc
	ctxWatchdogFallbacks, ctxWatchdogBackups, ctxRearms, ctxCtlRearms   *prometheus.Desc
	ctxInboxed                                                          *prometheus.Desc
	qpInfo, qpOnBackup, qpBackupReady, qpFallbacks, qpRecoveries        *prometheus.Desc
	qpReposted, qpRefused, qpProbes, qpOnBackupSecs, qpLastEvent        *prometheus.Desc
	portState, portMTU, netdevUp, netdevCarrier, netdevDowns, netdevMTU *prometheus.Desc
	statusErrors                                                        *prometheus.Desc
}

func newShiftCollector(root string, getenv func(string) string) *shiftCollector {
	// context tells apart two contexts of one process on the same device (each has a
	// status file of its own); without it their series would collide.
	proc := []string{"pid", "context", "device"}
	qp := []string{"pid", "context", "device", "qpn"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &shiftCollector{root: root, getenv: getenv, d: metricDescs{
		procInfo:             d("shift_context_info", "A failover context of a SHIFT process (value 1).", append(proc, "command", "backups", "job", "kv", "link_watch")...),
		procUpdated:          d("shift_context_status_updated_timestamp_seconds", "When the context last wrote its status file (Unix time).", proc...),
		procInterval:         d("shift_context_status_interval_seconds", "The context's status publishing interval.", proc...),
		ctxFallbacks:         d("shift_context_fallbacks_total", "Fallbacks completed by the context's QPs, destroyed QPs included.", proc...),
		ctxRefused:           d("shift_context_refused_fallbacks_total", "Fallbacks refused (unsafe WR, KV, backup not ready).", proc...),
		ctxReposted:          d("shift_context_reposted_wrs_total", "Send WRs reposted on backup QPs.", proc...),
		ctxRecoveries:        d("shift_context_recoveries_total", "Send sides back on the default NIC.", proc...),
		ctxProbes:            d("shift_context_probes_total", "Probes posted on fallen-back default paths.", proc...),
		ctxProbeFailures:     d("shift_context_probe_failures_total", "Probes that did not complete successfully.", proc...),
		ctxLinkEvents:        d("shift_context_link_events_total", "Link events read from the link watch source.", proc...),
		ctxTransitions:       d("shift_context_state_transitions_total", "State transitions of the context's QPs.", proc...),
		ctxAppErrors:         d("shift_context_application_errors_total", "QPs failed by the application's own error (reported as is, never failed over).", proc...),
		ctxAppStops:          d("shift_context_application_stops_total", "QPs the application moved to ERR, or to RESET once connected: SHIFT stopped with them.", proc...),
		ctxChains:            d("shift_context_backup_chains_total", "Moves of a QP from a failed backup to the next backup.", proc...),
		ctxAsyncEvents:       d("shift_context_async_events_total", "Async events of the default device read (and forwarded to the application).", proc...),
		ctxEventFallbacks:    d("shift_context_event_fallbacks_total", "Fallbacks started by DEVICE_FATAL, PORT_ERR or QP_FATAL.", proc...),
		ctxWatchdogFallbacks: d("shift_context_watchdog_fallbacks_total", "Fallbacks the completion watchdog started on a silent NIC.", proc...),
		ctxWatchdogBackups:   d("shift_context_watchdog_backups_total", "Backup NICs the completion watchdog took for hung (their QPs chained to the next backup).", proc...),
		ctxInboxed:           d("shift_context_inboxed_posts_total", "Posts that found their QP held by a failover transition and were left to SHIFT's engine instead of waiting.", proc...),
		ctxRearms:            d("shift_context_backup_rearms_total", "Backup QP sets rebuilt after their NIC's link came back.", proc...),
		ctxCtlRearms:         d("shift_context_control_rearms_total", "Control QP pairs rebuilt after their NIC's link came back.", proc...),
		qpInfo:               d("shift_qp_info", "A QP with its states and the NIC it uses (value 1).", append(qp, "send_state", "recv_state", "nic", "backup_chain")...),
		qpOnBackup:           d("shift_qp_on_backup", "1 while the QP's send side runs on the backup NIC.", qp...),
		qpBackupReady:        d("shift_qp_backup_ready", "1 when the backup QP is connected to the peer's.", qp...),
		qpFallbacks:          d("shift_qp_fallbacks_total", "Fallbacks of the QP to its backup completed.", qp...),
		qpRecoveries:         d("shift_qp_recoveries_total", "Returns of the QP's send side to the default NIC.", qp...),
		qpReposted:           d("shift_qp_reposted_wrs_total", "Send WRs of the QP reposted on its backup.", qp...),
		qpRefused:            d("shift_qp_refused_fallbacks_total", "Fallbacks of the QP refused (the QP failed).", qp...),
		qpProbes:             d("shift_qp_probes_total", "Probes of the QP's default path posted.", qp...),
		qpOnBackupSecs:       d("shift_qp_time_on_backup_seconds_total", "Time the QP's send side spent on the backup NIC.", qp...),
		qpLastEvent:          d("shift_qp_last_event_timestamp_seconds", "When the QP's state machine last moved (Unix time), by event.", append(qp, "event")...),
		portState:            d("shift_port_state", "The port's state as enum ibv_port_state (1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER).", "device", "port"),
		portMTU:              d("shift_port_active_mtu_bytes", "The port's active MTU (queried devices only).", "device", "port"),
		netdevUp:             d("shift_netdev_up", "1 when the netdev's operstate is up.", "netdev"),
		netdevCarrier:        d("shift_netdev_carrier", "The netdev's carrier (1 present, 0 lost).", "netdev"),
		netdevDowns:          d("shift_netdev_carrier_down_total", "Times the netdev lost its carrier (carrier_down_count).", "netdev"),
		netdevMTU:            d("shift_netdev_mtu_bytes", "The netdev's MTU.", "netdev"),
		statusErrors:         d("shift_status_read_errors", "Status files or directories that could not be read at this scrape."),
	}}
}

// Describe sends every descriptor.
func (c *shiftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.d.procInfo, c.d.procUpdated, c.d.procInterval, c.d.ctxFallbacks,
		c.d.ctxRefused, c.d.ctxReposted, c.d.ctxRecoveries, c.d.ctxProbes, c.d.ctxProbeFailures,
		c.d.ctxLinkEvents, c.d.ctxTransitions, c.d.ctxAppErrors, c.d.ctxAppStops, c.d.ctxChains, c.d.ctxAsyncEvents,
		c.d.ctxEventFallbacks, c.d.ctxWatchdogFallbacks, c.d.ctxWatchdogBackups, c.d.ctxInboxed, c.d.ctxRearms, c.d.ctxCtlRearms, c.d.qpInfo, c.d.qpOnBackup, c.d.qpBackupReady,
		c.d.qpFallbacks, c.d.qpRecoveries, c.d.qpReposted, c.d.qpRefused, c.d.qpProbes, c.d.qpOnBackupSecs,
		c.d.qpLastEvent, c.d.portState, c.d.portMTU, c.d.netdevUp, c.d.netdevCarrier, c.d.netdevDowns,
		c.d.netdevMTU, c.d.statusErrors} {
		ch <- d
	}
}

// Collect reads the status files, the ports and the netdevs now.
func (c *shiftCollector) Collect(ch chan<- prometheus.Metric) {
	procs := collectProcesses(c.getenv)
	for _, p := range procs.Processes {
		c.collectProcess(ch, p)
	}
	nerr := len(procs.Errors)
	rep, err := collectStatus(c.root, providerQuerier)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.d.portState, err)
		nerr++
	} else {
		c.collectDevices(ch, rep)
	}
	ch <- prometheus.MustNewConstMetric(c.d.statusErrors, prometheus.GaugeValue, float64(nerr))
}

func (c *shiftCollector) collectProcess(ch chan<- prometheus.Metric, p failover.ProcessStatus) {
	pid, seq := strconv.Itoa(p.PID), strconv.FormatUint(p.Seq, 10)
	m := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, append([]string{pid, seq, p.Device}, labels...)...)
	}
	k := p.Counters
	m(c.d.procInfo, prometheus.GaugeValue, 1, p.Command, strings.Join(p.Backups, ","), p.Job, p.KV, p.LinkWatch)
	m(c.d.procUpdated, prometheus.GaugeValue, float64(p.Updated.UnixNano())/1e9)
	m(c.d.procInterval, prometheus.GaugeValue, p.IntervalSeconds)
	m(c.d.ctxFallbacks, prometheus.CounterValue, float64(k.Fallbacks))
	m(c.d.ctxRefused, prometheus.CounterValue, float64(k.Refused))
	m(c.d.ctxReposted, prometheus.CounterValue, float64(k.Reposted))
	m(c.d.ctxRecoveries, prometheus.CounterValue, float64(k.Recoveries))
	m(c.d.ctxProbes, prometheus.CounterValue, float64(k.Probes))
	m(c.d.ctxProbeFailures, prometheus.CounterValue, float64(k.ProbeFailures))
	m(c.d.ctxLinkEvents, prometheus.CounterValue, float64(k.LinkEvents))
	m(c.d.ctxTransitions, prometheus.CounterValue, float64(k.Transitions))
	m(c.d.ctxAppErrors, prometheus.CounterValue, float64(k.AppErrors))
	m(c.d.ctxAppStops, prometheus.CounterValue, float64(k.AppStops))
	m(c.d.ctxChains, prometheus.CounterValue, float64(k.Chains))
	m(c.d.ctxAsyncEvents, prometheus.CounterValue, float64(k.AsyncEvents))
	m(c.d.ctxEventFallbacks, prometheus.CounterValue, float64(k.EventFallbacks))
	m(c.d.ctxWatchdogFallbacks, prometheus.CounterValue, float64(k.WatchdogFallbacks))
	m(c.d.ctxWatchdogBackups, prometheus.CounterValue, float64(k.WatchdogBackups))
	m(c.d.ctxInboxed, prometheus.CounterValue, float64(k.Inboxed))
	m(c.d.ctxRearms, prometheus.CounterValue, float64(k.Rearms))
	m(c.d.ctxCtlRearms, prometheus.CounterValue, float64(k.CtlRearms))
	for _, q := range p.QPs {
		qpn := fmt.Sprintf("%#x", q.QPN)
		mq := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
			m(d, t, v, append([]string{qpn}, labels...)...)
		}
		mq(c.d.qpInfo, prometheus.GaugeValue, 1, q.SendState, q.RecvState, q.NIC, strings.Join(q.BackupChain, ","))
		mq(c.d.qpOnBackup, prometheus.GaugeValue, b2f(q.NIC != "" && q.NIC != p.Device))
		mq(c.d.qpBackupReady, prometheus.GaugeValue, b2f(q.BackupReady))
		mq(c.d.qpFallbacks, prometheus.CounterValue, float64(q.Fallbacks))
		mq(c.d.qpRecoveries, prometheus.CounterValue, float64(q.Recoveries))
		mq(c.d.qpReposted, prometheus.CounterValue, float64(q.Reposted))
		mq(c.d.qpRefused, prometheus.CounterValue, float64(q.Refused))
		mq(c.d.qpProbes, prometheus.CounterValue, float64(q.Probes))
		mq(c.d.qpOnBackupSecs, prometheus.CounterValue, q.TimeOnBackup)
		if q.LastEvent != "" {
			mq(c.d.qpLastEvent, prometheus.GaugeValue, float64(q.LastEventTime.UnixNano())/1e9, q.LastEvent)
		}
	}
}

func (c *shiftCollector) collectDevices(ch chan<- prometheus.Metric, rep *statusReport) {
	for _, d := range rep.Devices {
		for _, p := range d.Ports {
			port := strconv.Itoa(p.Num)
			if s, ok := portStateNum(p.State); ok {
				ch <- prometheus.MustNewConstMetric(c.d.portState, prometheus.GaugeValue, float64(s), d.Name, port)
			}
			if p.ActiveMTU > 0 {
				ch <- prometheus.MustNewConstMetric(c.d.portMTU, prometheus.GaugeValue, float64(p.ActiveMTU), d.Name, port)
			}
		}
	}
	for _, n := range rep.Netdevs {
		if !n.Present {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.d.netdevUp, prometheus.GaugeValue, b2f(n.OperState == "up"), n.Name)
		if n.Carrier != nil {
			ch <- prometheus.MustNewConstMetric(c.d.netdevCarrier, prometheus.GaugeValue, float64(*n.Carrier), n.Name)
		}
		if n.CarrierDownCount != nil {
			ch <- prometheus.MustNewConstMetric(c.d.netdevDowns, prometheus.CounterValue, float64(*n.CarrierDownCount), n.Name)
		}
		if n.MTU > 0 {
			ch <- prometheus.MustNewConstMetric(c.d.netdevMTU, prometheus.GaugeValue, float64(n.MTU), n.Name)
		}
	}
}

// portStateNum is the inverse of portStateName.
func portStateNum(name string) (uint8, bool) {
	for s := range uint8(6) {
		if portStateName(s) == name {
			return s, true
		}
	}
	return 0, false
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/shift-rdma/shift/failover"
	"github.com/shift-rdma/shift/failover/kv"
)

// startMetrics runs shiftctl metrics on 127.0.0.1:0 until the test ends and returns the
// address it reports.
func startMetrics(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := metricsMain(ctx, append([]string{"-listen", "127.0.0.1:0"}, args...), pw)
		pw.CloseWithError(fmt.Errorf("metrics returned: %v", err))
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		go io.Copy(io.Discard, pr) //nolint:errcheck // drains until metricsMain closes the pipe
		if err := <-done; err != nil {
			t.Errorf("metrics: %v", err)
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "serving metrics on http://")
	if !ok {
		t.Fatalf("first line %q", line)
	}
	return strings.TrimSuffix(addr, "/metrics")
}

// scrape gets addr's /metrics and parses it with the Prometheus text parser.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	c := &http.Client{Timeout: 60 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %s\n%s", resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the exposition: %v", err)
	}
	return mfs
}

// sample is the value of the sample of family name whose labels include want, and whether
// there is exactly one.
func sample(mfs map[string]*dto.MetricFamily, name string, want map[string]string) (float64, dto.MetricType, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, 0, false
	}
	var v float64
	n := 0
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for k, w := range want {
			if got[k] != w {
				match = false
			}
		}
		if !match {
			continue
		}
		n++
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			v = m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			v = m.GetGauge().GetValue()
		default:
			v = m.GetUntyped().GetValue()
		}
	}
	return v, mf.GetType(), n == 1
}

// TestMetricsScrape: shiftctl metrics serves a live SHIFT process (this one) and the devices
// of a sysfs tree; the scraped text parses, and the values follow the QP's switch to the
// backup.
func TestMetricsScrape(t *testing.T) {
	l := newLiveShift(t, "mx")
	addr := startMetrics(t, "-sysfs", fakeSysfs(t))
	me := strconv.Itoa(os.Getpid())
	qp := map[string]string{"pid": me, "device": l.prefix + "0", "qpn": fmt.Sprintf("%#x", l.a.qp.QPN())}
	check := func(mfs map[string]*dto.MetricFamily, name string, labels map[string]string, typ dto.MetricType, want func(float64) bool) {
		t.Helper()
		v, gotTyp, ok := sample(mfs, name, labels)
		if !ok || gotTyp != typ || !want(v) {
			t.Errorf("%s%v: %v (%v, found %v)", name, labels, v, gotTyp, ok)
		}
	}
	eq := func(w float64) func(float64) bool { return func(v float64) bool { return v == w } }
	counter, gauge := dto.MetricType_COUNTER, dto.MetricType_GAUGE

	mfs := scrape(t, addr)
	check(mfs, "shift_qp_fallbacks_total", qp, counter, eq(0))
	check(mfs, "shift_qp_on_backup", qp, gauge, eq(0))
	check(mfs, "shift_qp_backup_ready", qp, gauge, eq(1))
	check(mfs, "shift_qp_info", map[string]string{"qpn": qp["qpn"], "device": qp["device"], "send_state": "Default",
		"nic": l.prefix + "0", "backup_chain": l.prefix + "1"}, gauge, eq(1))
	for _, name := range []string{"shift_context_application_errors_total", "shift_context_application_stops_total", "shift_context_backup_chains_total",
		"shift_context_async_events_total", "shift_context_event_fallbacks_total", "shift_context_watchdog_fallbacks_total", "shift_context_watchdog_backups_total",
		"shift_context_backup_rearms_total", "shift_context_control_rearms_total"} {
		check(mfs, name, map[string]string{"pid": me, "device": l.prefix + "0"}, counter, eq(0))
	}
	check(mfs, "shift_context_info", map[string]string{"pid": me, "device": l.prefix + "0", "kv": "mem", "link_watch": "none: emulated device, its link events come from the fabric"}, gauge, eq(1))
	check(mfs, "shift_port_state", map[string]string{"device": "mlx5_0", "port": "1"}, gauge, eq(4))
	check(mfs, "shift_port_state", map[string]string{"device": "mlx5_0", "port": "2"}, gauge, eq(1))
	check(mfs, "shift_port_state", map[string]string{"device": l.prefix + "0", "port": "1"}, gauge, eq(4))
	check(mfs, "shift_port_active_mtu_bytes", map[string]string{"device": l.prefix + "0", "port": "1"}, gauge, eq(4096))
	check(mfs, "shift_netdev_carrier_down_total", map[string]string{"netdev": "ens1f0np0"}, counter, eq(3))
	check(mfs, "shift_netdev_mtu_bytes", map[string]string{"netdev": "ens1f0np0"}, gauge, eq(9000))
	check(mfs, "shift_netdev_up", map[string]string{"netdev": "ens1f0np0"}, gauge, eq(1))
	check(mfs, "shift_status_read_errors", nil, gauge, eq(0))

	l.toBackup(t)
	mfs = scrape(t, addr)
	check(mfs, "shift_qp_fallbacks_total", qp, counter, eq(1))
	check(mfs, "shift_context_fallbacks_total", map[string]string{"pid": me, "device": l.prefix + "0"}, counter, eq(1))
	check(mfs, "shift_qp_on_backup", qp, gauge, eq(1))
	check(mfs, "shift_qp_time_on_backup_seconds_total", qp, counter, func(v float64) bool { return v > 0 })
	check(mfs, "shift_qp_info", map[string]string{"qpn": qp["qpn"], "device": qp["device"], "send_state": "Fallback",
		"nic": l.prefix + "1"}, gauge, eq(1))
	now := float64(time.Now().Unix())
	if v, _, ok := sample(mfs, "shift_qp_last_event_timestamp_seconds", qp); !ok || v < now-600 || v > now+1 {
		t.Errorf("last event at %v (now %v, found %v)", v, now, ok)
	}

	// A second context of this process on the same device: its series stand beside the
	// first's (the context label), and the scrape still succeeds.
	extra := openFOHost(t, l.prefix, 0, kv.NewMem(), "extra", func(o *failover.Options) { o.StatusInterval = time.Hour })
	if err := extra.ctx.PublishStatus(); err != nil {
		t.Fatal(err)
	}
	mfs = scrape(t, addr)
	seen := map[string]bool{}
	for _, m := range mfs["shift_context_info"].GetMetric() {
		got := map[string]string{}
		for _, lb := range m.GetLabel() {
			got[lb.GetName()] = lb.GetValue()
		}
		if got["pid"] == me && got["device"] == l.prefix+"0" {
			seen[got["context"]] = true
		}
	}
	if len(seen) != 2 {
		t.Errorf("contexts of this process on %s0: %v, want two", l.prefix, seen)
	}
}

func TestMetricsUsage(t *testing.T) {
	var out, errw strings.Builder
	for _, args := range [][]string{{"metrics"}, {"metrics", "-listen"}, {"metrics", "-listen", "127.0.0.1:0", "extra"}} {
		if code := run(args, &out, &errw); code != 2 {
			t.Errorf("%v: exit %d", args, code)
		}
	}
	errw.Reset()
	if code := run([]string{"metrics", "-listen", "256.0.0.1:1"}, &out, &errw); code != 1 || !strings.Contains(errw.String(), "listen") {
		t.Errorf("bad address: exit %d, %q", code, errw.String())
	}
}

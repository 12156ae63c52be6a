package nic

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkSleepWake measures how late a sleeping goroutine wakes up, for the sleep
// primitives the idle scanner could use (scanner.go): Go's time.Sleep (the runtime's timers
// wait in the network poller, epoll_pwait, whose timeout has millisecond resolution), the
// scanner's timerfd read through the network poller, and nanosleep(2) on a locked thread with
// the kernel's default timer slack (50 µs) and with a slack of 1 µs (PR_SET_TIMERSLACK).
// Reported: p50 and p99 of the time asleep for a requested d.
func BenchmarkSleepWake(b *testing.B) {
	kinds := []struct {
		name  string
		lock  bool
		slack int
		sleep func(time.Duration)
	}{
		{"time.Sleep", false, 0, time.Sleep},
		{"timerfd", false, 0, timerfdSleep},
		{"nanosleep", true, 0, nanosleep},
		{"nanosleep-slack1µs", true, 1000, nanosleep},
	}
	for _, k := range kinds {
		for _, d := range []time.Duration{10 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond, 200 * time.Microsecond} {
			b.Run(fmt.Sprintf("%s/d=%v", k.name, d), func(b *testing.B) {
				done := make(chan []time.Duration)
				n := b.N
				go func() {
					if k.lock {
						runtime.LockOSThread()
						defer runtime.UnlockOSThread()
						old, _ := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
						if k.slack > 0 {
							_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(k.slack), 0, 0, 0)
							defer func() { _ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0) }()
						}
					}
					got := make([]time.Duration, 0, n)
					for i := 0; i < n; i++ {
						t0 := time.Now()
						k.sleep(d)
						got = append(got, time.Since(t0))
					}
					done <- got
				}()
				got := <-done
				slices.Sort(got)
				us := func(q float64) float64 {
					return float64(got[min(len(got)-1, int(q*float64(len(got))))].Nanoseconds()) / 1e3
				}
				b.ReportMetric(us(0.5), "p50-µs")
				b.ReportMetric(us(0.99), "p99-µs")
			})
		}
	}
}

// timerfdSleep sleeps d on a fresh scanner ticker.
func timerfdSleep(d time.Duration) {
	t := newTicker()
	defer t.close()
	t.set(d)
	t.wait()
}

func nanosleep(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

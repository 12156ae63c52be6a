package demo

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Verdict is the run's one-line outcome.
func (r *Result) Verdict() string {
	errs := r.Errors()
	v := fmt.Sprintf("%s: %s bytes verified, %d messages verified, %d errors seen by the application",
		r.Mode, groupDigits(r.BytesVerified()), r.MsgsVerified(), len(errs))
	if len(errs) > 0 {
		v += " (first: " + errs[0].String() + ")"
	}
	return v
}

// WriteTable prints one line per sample: time and each series' Gbit/s.
func WriteTable(w io.Writer, r *Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s run, Gbit/s per %v interval\n%7s", r.Mode, r.Config.Interval, "t(s)")
	for _, n := range Series {
		fmt.Fprintf(&b, " %8s", n)
	}
	b.WriteString("\n")
	for _, s := range r.Samples {
		fmt.Fprintf(&b, "%7.2f", s.At.Seconds())
		for i := range Series {
			fmt.Fprintf(&b, " %8.3f", s.Rate(i))
		}
		b.WriteString(markAt(r, s))
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// markAt names the schedule events that fall in sample s's interval.
func markAt(r *Result, s Sample) string {
	var m []string
	for _, e := range r.Events {
		if e.At > s.At-s.Span && e.At <= s.At {
			m = append(m, e.What)
		}
	}
	if len(m) == 0 {
		return ""
	}
	return "  <- " + strings.Join(m, ", ")
}

// WriteCSV writes every run's samples: mode, t_s, span_s, then bytes and Gbit/s per series.
func WriteCSV(w io.Writer, runs []*Result) error {
	cw := csv.NewWriter(w)
	head := []string{"mode", "t_s", "span_s"}
	for _, n := range Series {
		head = append(head, strings.ToLower(n)+"_bytes", strings.ToLower(n)+"_gbps")
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, r := range runs {
		for _, s := range r.Samples {
			row := []string{string(r.Mode), ftoa(s.At.Seconds()), ftoa(s.Span.Seconds())}
			for i := range Series {
				row = append(row, strconv.FormatUint(s.Bytes[i], 10), ftoa(s.Rate(i)))
			}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', 6, 64) }

func groupDigits(v uint64) string {
	s := strconv.FormatUint(v, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

package demo

import (
	"fmt"
	"image/color"
)

// Chart is a line chart: panels stacked on one time axis, vertical markers across all of
// them (the failure and the recovery), a legend per panel. WriteSVG and WritePNG draw it with
// gonum/plot (plot.go).
type Chart struct {
	Title   string
	XLabel  string
	XMax    float64
	Panels  []Panel
	Markers []Marker
}

// Panel is one plot area; Markers are drawn in this panel only, below the chart's.
type Panel struct {
	Title   string
	YLabel  string
	Series  []ChartSeries
	Markers []Marker
}

// ChartSeries is one polyline.
type ChartSeries struct {
	Name   string
	Color  color.RGBA
	Dashed bool
	X, Y   []float64
}

// Marker is a vertical line at X with a label.
type Marker struct {
	X     float64
	Label string
	Color color.RGBA
}

var (
	colRed     = color.RGBA{214, 39, 40, 255}
	colBlue    = color.RGBA{31, 119, 180, 255}
	colGreen   = color.RGBA{44, 160, 44, 255}
	colOrange  = color.RGBA{255, 127, 14, 255}
	colPurple  = color.RGBA{148, 103, 189, 255}
	colGray    = color.RGBA{110, 110, 110, 255}
	colDarkRed = color.RGBA{140, 0, 0, 255}
)

// NewTimelineChart draws the runs on one time axis like the paper's Figure 7: the first
// panel is each run's verified application throughput (both streams), then one panel per run
// with its streams and host 0's NICs; the failure and the recovery are marked.
func NewTimelineChart(runs []*Result) *Chart {
	c := &Chart{Title: "SHIFT-Go demo: throughput with a default NIC failing", XLabel: "time (s)"}
	runColor := map[Mode]color.RGBA{ModeProvider: colRed, ModeShift: colBlue, ModeShiftWatch: colPurple}
	total := Panel{Title: "application throughput, verified (WRITE + SEND)", YLabel: "Gbit/s"}
	for _, r := range runs {
		c.XMax = max(c.XMax, r.Config.Duration.Seconds())
		s := ChartSeries{Name: string(r.Mode), Color: runColor[r.Mode]}
		for _, sm := range r.Samples {
			s.X = append(s.X, sm.At.Seconds())
			s.Y = append(s.Y, sm.Rate(0)+sm.Rate(1))
		}
		total.Series = append(total.Series, s)
	}
	c.Panels = append(c.Panels, total)
	cols := []color.RGBA{colGreen, colOrange, colPurple, colGray}
	for _, r := range runs {
		p := Panel{Title: string(r.Mode) + " mode: streams and host 0's NICs", YLabel: "Gbit/s"}
		if errs := r.Errors(); len(errs) > 0 {
			p.Markers = append(p.Markers, Marker{X: errs[0].At.Seconds(), Label: "app error", Color: colDarkRed})
		}
		if on, ok := r.OnBackupAt(); ok {
			p.Markers = append(p.Markers, Marker{X: on.Seconds(), Label: fmt.Sprintf("on NIC1 +%.2fs", (on - r.Config.FailAt).Seconds()), Color: colBlue})
		}
		if back, ok := r.BackOnDefaultAt(); ok {
			p.Markers = append(p.Markers, Marker{X: back.Seconds(), Label: fmt.Sprintf("back on NIC0 +%.2fs", (back - r.Config.RecoverAt).Seconds()), Color: colPurple})
		}
		for i, name := range Series {
			s := ChartSeries{Name: name, Color: cols[i%len(cols)], Dashed: i >= 2}
			for _, sm := range r.Samples {
				s.X = append(s.X, sm.At.Seconds())
				s.Y = append(s.Y, sm.Rate(i))
			}
			p.Series = append(p.Series, s)
		}
		c.Panels = append(c.Panels, p)
	}
	if len(runs) > 0 {
		cfg := runs[0].Config
		if cfg.hasFailure() {
			c.Markers = append(c.Markers, Marker{X: cfg.FailAt.Seconds(), Label: fmt.Sprintf("host %d NIC0 down", cfg.FailHost), Color: colRed})
		}
		if cfg.hasRecovery() {
			c.Markers = append(c.Markers, Marker{X: cfg.RecoverAt.Seconds(), Label: "NIC0 up", Color: colGreen})
		}
	}
	return c
}

package demo

import (
	"fmt"
	"image/color"
	"math"
)

// Chart is a renderer-independent line chart: panels stacked on one time axis, vertical
// markers across all of them (the failure and the recovery), a legend per panel. WriteSVG and
// WritePNG draw the same layout, so a point lands on the same pixel in both.
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

// Chart geometry in pixels.
const (
	chartWidth   = 1000
	panelHeight  = 240
	marginLeft   = 90
	marginRight  = 190 // the legend
	marginTop    = 80
	panelGap     = 70
	marginBottom = 60
	yTicks       = 4
)

var (
	colBlack   = color.RGBA{0, 0, 0, 255}
	colGrid    = color.RGBA{225, 225, 225, 255}
	colWhite   = color.RGBA{255, 255, 255, 255}
	colRed     = color.RGBA{214, 39, 40, 255}
	colBlue    = color.RGBA{31, 119, 180, 255}
	colGreen   = color.RGBA{44, 160, 44, 255}
	colOrange  = color.RGBA{255, 127, 14, 255}
	colPurple  = color.RGBA{148, 103, 189, 255}
	colGray    = color.RGBA{110, 110, 110, 255}
	colDarkRed = color.RGBA{140, 0, 0, 255}
)

// Size is the chart's width and height in pixels.
func (c *Chart) Size() (w, h int) {
	return chartWidth, marginTop + len(c.Panels)*panelHeight + max(len(c.Panels)-1, 0)*panelGap + marginBottom
}

// plotRect is panel i's plot area: x0,y0 top left, x1,y1 bottom right.
func (c *Chart) plotRect(i int) (x0, y0, x1, y1 int) {
	y0 = marginTop + i*(panelHeight+panelGap)
	return marginLeft, y0, chartWidth - marginRight, y0 + panelHeight
}

// yMax is panel i's axis top: yTicks steps of a 1-2-5 round number, at or above the
// largest value.
func (c *Chart) yMax(i int) float64 {
	m := 0.0
	for _, s := range c.Panels[i].Series {
		for _, y := range s.Y {
			m = max(m, y)
		}
	}
	return niceCeil(m/yTicks) * yTicks
}

func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*e {
			return m * e
		}
	}
	return 10 * e
}

// toPixel maps a data point of panel i to pixel coordinates (continuous).
func (c *Chart) toPixel(i int, x, y float64) (float64, float64) {
	x0, y0, x1, y1 := c.plotRect(i)
	xm := c.XMax
	if xm <= 0 {
		xm = 1
	}
	ym := c.yMax(i)
	y = min(max(y, 0), ym)
	x = min(max(x, 0), xm)
	return float64(x0) + x/xm*float64(x1-x0), float64(y1) - y/ym*float64(y1-y0)
}

// xTicks are the time axis labels: every second up to 20 s, then every 5 or 10.
func (c *Chart) xTicks() []float64 {
	step := 1.0
	if c.XMax > 20 {
		step = 5
	}
	if c.XMax > 60 {
		step = math.Ceil(c.XMax / 10)
	}
	if c.XMax < 3 {
		step = 0.5
	}
	var t []float64
	for x := 0.0; x <= c.XMax+1e-9; x += step {
		t = append(t, x)
	}
	return t
}

func tickLabel(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	if v*10 == math.Trunc(v*10) {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// NewTimelineChart draws the runs on one time axis like the paper's Figure 7: the first
// panel is each run's verified application throughput (both streams), then one panel per run
// with its streams and host 0's NICs; the failure and the recovery are marked.
func NewTimelineChart(runs []*Result) *Chart {
	c := &Chart{Title: "SHIFT-Go demo: throughput with a default NIC failing", XLabel: "time (s)"}
	runColor := map[Mode]color.RGBA{ModeProvider: colRed, ModeShift: colBlue}
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

// markerRow is the label row of the k-th marker drawn in a panel: the chart's markers on
// the first row, the panel's own below, so labels of nearby markers do not overlap.
func markerRow(k, chartMarkers int) int {
	if k < chartMarkers {
		return 0
	}
	return 1
}

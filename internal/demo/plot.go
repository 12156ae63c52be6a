package demo

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The chart is drawn with gonum/plot: one plot per panel, stacked on the chart's time axis,
// the chart's markers (the failure, the recovery) on every panel and each panel's own on it.
// Panels with the same y label share one y range, so equal heights are equal rates.

const (
	plotWidth   = 10 * vg.Inch
	panelHeight = 2.6 * vg.Inch
	titleHeight = 0.5 * vg.Inch
)

// Size is the chart's size in points (PNG pixels at 72 dpi are the same numbers).
func (c *Chart) Size() (w, h vg.Length) {
	return plotWidth, titleHeight + vg.Length(max(len(c.Panels), 1))*panelHeight
}

// yRanges is the shared y maximum of each y label: the largest value of any panel with it,
// rounded up to a readable step, at least 1.
func (c *Chart) yRanges() map[string]float64 {
	m := map[string]float64{}
	for _, p := range c.Panels {
		for _, s := range p.Series {
			for _, y := range s.Y {
				m[p.YLabel] = max(m[p.YLabel], y)
			}
		}
	}
	for k, v := range m {
		m[k] = niceCeil(v)
	}
	return m
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (0 becomes 1).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	step := 1.0 // the largest power of ten not above v
	for step > v {
		step /= 10
	}
	for step*10 <= v {
		step *= 10
	}
	for _, f := range []float64{1, 2, 5, 10} {
		if f*step >= v {
			return f * step
		}
	}
	return 10 * step
}

// plots builds the panels' plots.
func (c *Chart) plots() ([]*plot.Plot, error) {
	ys := c.yRanges()
	var out []*plot.Plot
	for i, p := range c.Panels {
		pl := plot.New()
		pl.Title.Text = p.Title
		pl.Y.Label.Text = p.YLabel
		pl.X.Min, pl.X.Max = 0, c.XMax
		pl.Y.Min, pl.Y.Max = 0, ys[p.YLabel]
		if i == len(c.Panels)-1 {
			pl.X.Label.Text = c.XLabel
		}
		pl.Add(plotter.NewGrid())
		pl.Legend.Top = true
		for _, s := range p.Series {
			xys := make(plotter.XYs, len(s.X))
			for k := range s.X {
				xys[k].X, xys[k].Y = s.X[k], s.Y[k]
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, fmt.Errorf("demo: chart series %q: %w", s.Name, err)
			}
			l.Color = s.Color
			l.Width = vg.Points(1.5)
			if s.Dashed {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			pl.Add(l)
			pl.Legend.Add(s.Name, l)
		}
		ms := append(append([]Marker{}, c.Markers...), p.Markers...)
		for k, m := range ms {
			if err := addMarker(pl, m, k); err != nil {
				return nil, err
			}
		}
		out = append(out, pl)
	}
	return out, nil
}

// addMarker draws a vertical line at m.X with its label near the top; the k-th marker's
// label sits a row lower than the one before, so nearby labels do not overlap.
func addMarker(pl *plot.Plot, m Marker, k int) error {
	top := pl.Y.Max
	l, err := plotter.NewLine(plotter.XYs{{X: m.X, Y: pl.Y.Min}, {X: m.X, Y: top}})
	if err != nil {
		return err
	}
	l.Color, l.Width, l.Dashes = m.Color, vg.Points(1.2), []vg.Length{vg.Points(2), vg.Points(2)}
	lb, err := plotter.NewLabels(plotter.XYLabels{
		XYs:    plotter.XYs{{X: m.X, Y: top * (0.93 - 0.1*float64(k%4))}},
		Labels: []string{" " + m.Label},
	})
	if err != nil {
		return err
	}
	for i := range lb.TextStyle {
		lb.TextStyle[i].Color = m.Color
	}
	pl.Add(l, lb)
	return nil
}

// drawOn draws the title and the panels, stacked, on dc.
func (c *Chart) drawOn(dc draw.Canvas) error {
	if len(c.Panels) == 0 {
		return fmt.Errorf("demo: chart %q has no panels", c.Title)
	}
	w, h := c.Size()
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	ps, err := c.plots()
	if err != nil {
		return err
	}
	title := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, vg.Points(14)),
		Handler: plot.DefaultTextHandler, XAlign: draw.XCenter, YAlign: draw.YCenter}
	dc.FillText(title, vg.Point{X: w / 2, Y: h - titleHeight/2}, c.Title)
	body := draw.Crop(dc, 0, 0, 0, -titleHeight)
	grid := make([][]*plot.Plot, len(ps))
	for i, p := range ps {
		grid[i] = []*plot.Plot{p}
	}
	cells := plot.Align(grid, draw.Tiles{Rows: len(ps), Cols: 1, PadY: vg.Points(12), PadX: vg.Points(6),
		PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(6), PadRight: vg.Points(10)}, body)
	for i, p := range ps {
		p.Draw(cells[i][0])
	}
	return nil
}

// WritePNG draws the chart as a PNG image.
func (c *Chart) WritePNG(w io.Writer) error {
	cw, ch := c.Size()
	img := vgimg.NewWith(vgimg.UseWH(cw, ch), vgimg.UseDPI(96))
	if err := c.drawOn(draw.New(img)); err != nil {
		return err
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// WriteSVG draws the chart as an SVG document.
func (c *Chart) WriteSVG(w io.Writer) error {
	cw, ch := c.Size()
	s := vgsvg.New(cw, ch)
	if err := c.drawOn(draw.New(s)); err != nil {
		return err
	}
	_, err := s.WriteTo(w)
	return err
}

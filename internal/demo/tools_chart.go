package demo

import (
	"fmt"
	"image/color"
	"io"
	"time"
)

// NewToolsChart draws the tools runs as the main timeline does: host A's traffic per run on
// top, then each run's two rails, with the link's down and up marked and where a run's
// program died.
func NewToolsChart(runs []*ToolResult) *Chart {
	c := &Chart{Title: "unmodified ib_write_bw through libmlx5-shift, host A's default rail pulled", XLabel: "time (s)"}
	runColor := map[Mode]color.RGBA{ModeProvider: colRed, ModeShift: colBlue}
	total := Panel{Title: "host A's traffic, both rails", YLabel: "Gbit/s"}
	for _, r := range runs {
		c.XMax = max(c.XMax, r.Duration.Seconds()+1)
		s := ChartSeries{Name: toolModeName(r.Mode), Color: runColor[r.Mode]}
		for _, sm := range r.Samples {
			s.X = append(s.X, sm.At.Seconds())
			s.Y = append(s.Y, sm.Rails[0]+sm.Rails[1])
		}
		total.Series = append(total.Series, s)
	}
	c.Panels = append(c.Panels, total)
	for _, r := range runs {
		p := Panel{Title: toolModeName(r.Mode) + ": host A's rails", YLabel: "Gbit/s"}
		if r.Err != nil {
			p.Markers = append(p.Markers, Marker{X: r.EndedAt.Seconds(), Label: "ib_write_bw died", Color: colDarkRed})
		}
		for i, col := range []color.RGBA{colGreen, colOrange} {
			s := ChartSeries{Name: fmt.Sprintf("rail %d (s%d)", i, i), Color: col, Dashed: i == 1}
			for _, sm := range r.Samples {
				s.X = append(s.X, sm.At.Seconds())
				s.Y = append(s.Y, sm.Rails[i])
			}
			p.Series = append(p.Series, s)
		}
		c.Panels = append(c.Panels, p)
	}
	return c
}

// withLinkMarkers adds the schedule's down and up to c.
func withLinkMarkers(c *Chart, cfg ToolsConfig) *Chart {
	c.Markers = append(c.Markers, Marker{X: cfg.FailAt.Seconds(), Label: "rail 0 down", Color: colRed},
		Marker{X: cfg.RecoverAt.Seconds(), Label: "rail 0 up", Color: colGreen})
	return c
}

func toolModeName(m Mode) string {
	if m == ModeShift {
		return "SHIFT"
	}
	return "plain"
}

// WriteToolsCSV writes one row per run and sample: mode, time, each rail's Gbit/s.
func WriteToolsCSV(w io.Writer, runs []*ToolResult) error {
	if _, err := fmt.Fprintln(w, "mode,t_s,rail0_gbps,rail1_gbps"); err != nil {
		return err
	}
	for _, r := range runs {
		for _, s := range r.Samples {
			if _, err := fmt.Fprintf(w, "%s,%s,%s,%s\n", r.Mode, ftoa(s.At.Seconds()), ftoa(s.Rails[0]), ftoa(s.Rails[1])); err != nil {
				return err
			}
		}
	}
	return nil
}

// Notes says where a SHIFT run's traffic went around the failure.
func (r *ToolResult) Notes(cfg ToolsConfig) []string {
	if r.Mode != ModeShift || r.Err != nil {
		return nil
	}
	on1, back0 := r.onRail(1, cfg.FailAt), r.onRail(0, cfg.RecoverAt)
	var out []string
	if on1 >= 0 {
		out = append(out, fmt.Sprintf("traffic on rail 1 within %v of the down", (on1-cfg.FailAt).Round(time.Millisecond)))
	}
	if back0 >= 0 {
		out = append(out, fmt.Sprintf("back on rail 0 within %v of the up", (back0-cfg.RecoverAt).Round(time.Millisecond)))
	}
	return out
}

package demo

import (
	"bytes"
	"encoding/xml"
	"image/color"
	"image/png"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

func testChart() *Chart {
	c := &Chart{Title: "test", XLabel: "time (s)", XMax: 10}
	p := Panel{Title: "p0", YLabel: "Gbit/s"}
	s1 := ChartSeries{Name: "flat", Color: color.RGBA{10, 200, 30, 255}}
	s2 := ChartSeries{Name: "ramp & <up>", Color: color.RGBA{200, 10, 160, 255}, Dashed: true}
	for x := 0.0; x <= 10; x += 0.5 {
		s1.X, s1.Y = append(s1.X, x), append(s1.Y, 3)
		s2.X, s2.Y = append(s2.X, x), append(s2.Y, x)
	}
	p.Series = []ChartSeries{s1, s2}
	q := Panel{Title: "p1", YLabel: "Gbit/s", Series: []ChartSeries{{Name: "lone", Color: color.RGBA{0, 0, 250, 255}, X: []float64{5}, Y: []float64{1}}}}
	c.Panels = []Panel{p, q}
	c.Markers = []Marker{{X: 2.5, Label: "down", Color: color.RGBA{250, 0, 0, 255}}}
	return c
}

// TestSVG: the SVG is well-formed, and names the chart, every panel, every series and
// every marker.
func TestSVG(t *testing.T) {
	c := testChart()
	var buf bytes.Buffer
	if err := c.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	var root string
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			text.Write(tok)
			text.WriteString("\n")
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q", root)
	}
	for _, want := range []string{"test", "p0", "p1", "flat", "ramp & <up>", "lone", "down", "time (s)", "Gbit/s"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("SVG text lacks %q", want)
		}
	}
}

// TestPNG: the PNG has the chart's size at 96 dpi and shows the series and marker colours.
func TestPNG(t *testing.T) {
	c := testChart()
	var buf bytes.Buffer
	if err := c.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w, h := c.Size()
	if b := img.Bounds(); b.Dx() != int(math.Round(w.Dots(96))) || b.Dy() != int(math.Round(h.Dots(96))) {
		t.Fatalf("PNG is %v, want %.0fx%.0f", b, w.Dots(96), h.Dots(96))
	}
	count := func(want color.RGBA) int {
		n := 0
		b := img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				r, g, bb, _ := img.At(x, y).RGBA()
				if absDiff(r>>8, want.R) < 16 && absDiff(g>>8, want.G) < 16 && absDiff(bb>>8, want.B) < 16 {
					n++
				}
			}
		}
		return n
	}
	for _, col := range []color.RGBA{c.Panels[0].Series[0].Color, c.Panels[0].Series[1].Color, c.Markers[0].Color} {
		if n := count(col); n < 20 { // anti-aliased: the dashed marker keeps few exact pixels
			t.Errorf("colour %v: %d pixels", col, n)
		}
	}
}

func absDiff(a uint32, b uint8) uint32 {
	if a > uint32(b) {
		return a - uint32(b)
	}
	return uint32(b) - a
}

// TestSharedYScale: panels with the same y label share one y range, a round number above
// the largest value of any of them.
func TestSharedYScale(t *testing.T) {
	c := testChart() // p0 reaches 10, p1 only 1, both in Gbit/s
	ps, err := c.plots()
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].Y.Max != 10 || ps[1].Y.Max != 10 {
		t.Errorf("y ranges %v and %v, want both 10", ps[0].Y.Max, ps[1].Y.Max)
	}
	for _, c := range []struct{ in, want float64 }{{0, 1}, {0.3, 0.5}, {3, 5}, {10, 10}, {12, 20}, {51, 100}} {
		if got := niceCeil(c.in); got != c.want {
			t.Errorf("niceCeil(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestChartWithoutPanels(t *testing.T) {
	c := &Chart{}
	if err := c.WritePNG(io.Discard); err == nil {
		t.Error("PNG of an empty chart accepted")
	}
	if err := c.WriteSVG(io.Discard); err == nil {
		t.Error("SVG of an empty chart accepted")
	}
}

func TestTimelineChartFromRuns(t *testing.T) {
	cfg := Config{Duration: 2 * time.Second, FailAt: 500 * time.Millisecond, RecoverAt: time.Second}.Defaults()
	r := &Result{Mode: ModeProvider, Config: cfg}
	for i := 1; i <= 20; i++ {
		r.Samples = append(r.Samples, Sample{At: time.Duration(i) * 100 * time.Millisecond, Span: 100 * time.Millisecond,
			Bytes: []uint64{uint64(i) * 1e6, 5e5, 2e6, 0}})
	}
	c := NewTimelineChart([]*Result{r})
	if len(c.Panels) != 2 || len(c.Markers) != 2 || c.XMax != 2 {
		t.Fatalf("chart: %d panels, %d markers, x max %v", len(c.Panels), len(c.Markers), c.XMax)
	}
	tot := c.Panels[0].Series[0]
	if got, want := tot.Y[9], (10e6+5e5)*8/0.1/1e9; math.Abs(got-want) > 1e-9 {
		t.Fatalf("total at 1 s = %v Gbit/s, want %v", got, want)
	}
	r.Events = []Event{{At: 550 * time.Millisecond, What: "host 0 NIC0 link down"}}
	var tab bytes.Buffer
	if err := WriteTable(&tab, r); err != nil {
		t.Fatal(err)
	}
	tl := strings.Split(strings.TrimSpace(tab.String()), "\n")
	if len(tl) != 22 || !strings.HasSuffix(tl[7], "<- host 0 NIC0 link down") || strings.Contains(tl[6], "<-") {
		t.Fatalf("table:\n%s", tab.String())
	}
	var csv bytes.Buffer
	if err := WriteCSV(&csv, []*Result{r}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(csv.String()), "\n")
	if len(lines) != 21 || !strings.HasPrefix(lines[1], "provider,0.100000,0.100000,1000000,0.080000,") {
		t.Fatalf("CSV: %d lines, first row %q", len(lines), lines[1])
	}
}

// TestSwitchMarks: the SHIFT panel marks when the traffic reached the backup NIC and when it
// was back on the default one, with the gaps from the link's down and up.
func TestSwitchMarks(t *testing.T) {
	cfg := Config{Duration: 2 * time.Second, FailAt: 500 * time.Millisecond, RecoverAt: time.Second}.Defaults()
	r := &Result{Mode: ModeShift, Config: cfg}
	for i := 1; i <= 20; i++ {
		at := time.Duration(i) * 100 * time.Millisecond
		var nic0, nic1 uint64
		switch {
		case at <= 500*time.Millisecond || at >= 1300*time.Millisecond:
			nic0 = 4e6
		case at >= 900*time.Millisecond:
			nic1 = 4e6
		}
		r.Samples = append(r.Samples, Sample{At: at, Span: 100 * time.Millisecond, Bytes: []uint64{1e6, 1e6, nic0, nic1}})
	}
	on, ok1 := r.OnBackupAt()
	back, ok2 := r.BackOnDefaultAt()
	if !ok1 || on != 900*time.Millisecond || !ok2 || back != 1300*time.Millisecond {
		t.Fatalf("on backup %v %v, back %v %v", on, ok1, back, ok2)
	}
	c := NewTimelineChart([]*Result{r})
	var labels []string
	for _, m := range c.Panels[1].Markers {
		labels = append(labels, m.Label)
	}
	if strings.Join(labels, "|") != "on NIC1 +0.40s|back on NIC0 +0.30s" {
		t.Errorf("SHIFT panel markers %q", labels)
	}
	if notes := strings.Join(r.Notes(), "\n"); !strings.Contains(notes, "traffic on the backup NIC 0.40s after the link went down") {
		t.Errorf("notes lack the gap:\n%s", notes)
	}
}

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

func TestSVGIsValidXML(t *testing.T) {
	c := testChart()
	var buf bytes.Buffer
	if err := c.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(&buf)
	var root string
	polylines, texts := 0, 0
	var names []string
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root == "" {
			root = se.Name.Local
			if se.Name.Space != "http://www.w3.org/2000/svg" {
				t.Errorf("root namespace %q", se.Name.Space)
			}
		}
		switch se.Name.Local {
		case "polyline":
			polylines++
			for _, a := range se.Attr {
				if a.Name.Local == "data-name" {
					names = append(names, a.Value)
				}
				if a.Name.Local == "points" && len(strings.Fields(a.Value)) == 0 {
					t.Errorf("polyline without points")
				}
			}
		case "text":
			texts++
		}
	}
	if root != "svg" || polylines != 3 || texts == 0 {
		t.Fatalf("root %q, %d polylines (want 3), %d texts", root, polylines, texts)
	}
	if names[1] != "ramp & <up>" {
		t.Fatalf("series name came back as %q", names[1])
	}
}

func TestPNGGeometry(t *testing.T) {
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
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("PNG is %v, want %dx%d", b, w, h)
	}
	at := func(panel int, x, y float64) color.RGBA {
		px, py := c.toPixel(panel, x, y)
		r, g, b, a := img.At(int(math.Round(px)), int(math.Round(py))).RGBA()
		return color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
	}
	flat := c.Panels[0].Series[0].Color
	// The flat series is drawn at y=3 across the axis, away from the marker and the ramp.
	for _, x := range []float64{0.75, 4.25, 6.1, 9.6} {
		if got := at(0, x, 3); got != flat {
			t.Errorf("flat series missing at x=%v: pixel %v", x, got)
		}
		if got := at(0, x, 1.5); got == flat {
			t.Errorf("flat series drawn at y=1.5, x=%v", x)
		}
	}
	// The axis top is a round number above the data (10 for a ramp to 10).
	if ym := c.yMax(0); ym != 10 {
		t.Errorf("y axis top %v, want 10", ym)
	}
	// The ramp is dashed: along it, some pixels have its colour and some do not.
	ramp := c.Panels[0].Series[1].Color
	on, off := 0, 0
	for x := 6.0; x < 9.0; x += 0.02 {
		if at(0, x, x) == ramp {
			on++
		} else {
			off++
		}
	}
	if on == 0 || off == 0 {
		t.Errorf("dashed ramp: %d pixels on, %d off", on, off)
	}
	// The marker crosses both panels.
	m := c.Markers[0]
	for p := range c.Panels {
		if got := at(p, m.X, 0.2*c.yMax(p)); got != m.Color {
			t.Errorf("marker missing on panel %d: %v", p, got)
		}
	}
	// A single-point series is still visible.
	if got := at(1, 5, 1); got != c.Panels[1].Series[0].Color {
		t.Errorf("single point not drawn: %v", got)
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

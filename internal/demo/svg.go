package demo

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"image/color"
	"io"
	"strings"
)

func svgColor(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

func svgText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // writes to a strings.Builder cannot fail
	return b.String()
}

// WriteSVG writes the chart as a standalone SVG document.
func (c *Chart) WriteSVG(w io.Writer) error {
	if len(c.Panels) == 0 {
		return errors.New("demo: chart has no panels")
	}
	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format, a...) }
	W, H := c.Size()
	p(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`+"\n", W, H, W, H)
	p(`<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", W, H)
	p(`<text x="%d" y="%d" font-size="18" font-weight="bold">%s</text>`+"\n", marginLeft, 34, svgText(c.Title))
	for i, pan := range c.Panels {
		x0, y0, x1, y1 := c.plotRect(i)
		ym := c.yMax(i)
		p(`<g class="panel">` + "\n")
		p(`<text x="%d" y="%d" font-size="14">%s</text>`+"\n", x0, y0-14, svgText(pan.Title))
		for k := 0; k <= yTicks; k++ {
			v := ym * float64(k) / yTicks
			_, py := c.toPixel(i, 0, v)
			p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", x0, py, x1, py, svgColor(colGrid))
			p(`<text x="%d" y="%.1f" font-size="12" text-anchor="end">%s</text>`+"\n", x0-6, py+4, tickLabel(v))
		}
		for _, t := range c.xTicks() {
			px, _ := c.toPixel(i, t, 0)
			p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", px, y0, px, y1, svgColor(colGrid))
			p(`<text x="%.1f" y="%d" font-size="12" text-anchor="middle">%s</text>`+"\n", px, y1+16, tickLabel(t))
		}
		p(`<text x="%d" y="%d" font-size="12" text-anchor="end">%s</text>`+"\n", x0-6, y0-14, svgText(pan.YLabel))
		for k, m := range append(append([]Marker(nil), c.Markers...), pan.Markers...) {
			px, _ := c.toPixel(i, m.X, 0)
			p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="6,4"/>`+"\n",
				px, y0, px, y1, svgColor(m.Color))
			p(`<text x="%.1f" y="%d" font-size="12" fill="%s">%s</text>`+"\n", px+4, y0+14+markerRow(k, len(c.Markers))*18, svgColor(m.Color), svgText(m.Label))
		}
		for _, s := range pan.Series {
			var pts strings.Builder
			for k := range s.X {
				px, py := c.toPixel(i, s.X[k], s.Y[k])
				fmt.Fprintf(&pts, "%.1f,%.1f ", px, py)
			}
			dash := ""
			if s.Dashed {
				dash = ` stroke-dasharray="8,4"`
			}
			p(`<polyline class="series" data-name="%s" fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n",
				svgText(s.Name), svgColor(s.Color), dash, strings.TrimSpace(pts.String()))
		}
		p(`<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#000000"/>`+"\n", x0, y0, x1-x0, y1-y0)
		for k, s := range pan.Series {
			ly := y0 + 10 + k*20
			p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", x1+12, ly, x1+40, ly, svgColor(s.Color))
			p(`<text x="%d" y="%d" font-size="12">%s</text>`+"\n", x1+46, ly+4, svgText(s.Name))
		}
		p("</g>\n")
	}
	_, _, _, yb := c.plotRect(len(c.Panels) - 1)
	p(`<text x="%d" y="%d" font-size="13" text-anchor="middle">%s</text>`+"\n", (marginLeft+chartWidth-marginRight)/2, yb+40, svgText(c.XLabel))
	p("</svg>\n")
	return bw.Flush()
}

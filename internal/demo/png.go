package demo

import (
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
)

// canvas draws on an RGBA image with the few primitives the chart needs.
type canvas struct{ img *image.RGBA }

func (c canvas) set(x, y int, col color.RGBA) {
	if image.Pt(x, y).In(c.img.Rect) {
		c.img.SetRGBA(x, y, col)
	}
}

func (c canvas) fill(r image.Rectangle, col color.RGBA) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c.set(x, y, col)
		}
	}
}

// line draws from (x0,y0) to (x1,y1) with a square pen of width w; with dash > 0 it draws
// dash pixels, skips dash/2, and so on, measured along the line.
func (c canvas) line(x0, y0, x1, y1 float64, w int, col color.RGBA, dash int) {
	n := int(math.Ceil(math.Max(math.Abs(x1-x0), math.Abs(y1-y0))))
	lo := -(w - 1) / 2
	for i := 0; i <= n; i++ {
		if dash > 0 && i%(dash+dash/2) >= dash {
			continue
		}
		t := 0.0
		if n > 0 {
			t = float64(i) / float64(n)
		}
		x := int(math.Round(x0 + t*(x1-x0)))
		y := int(math.Round(y0 + t*(y1-y0)))
		for dy := lo; dy < lo+w; dy++ {
			for dx := lo; dx < lo+w; dx++ {
				c.set(x+dx, y+dy, col)
			}
		}
	}
}

// text draws s with its top-left corner at (x, y).
func (c canvas) text(x, y int, s string, scale int, col color.RGBA) {
	for _, r := range s {
		g := glyph(r)
		for row := range 7 {
			for bit := range 5 {
				if g[row]>>(4-bit)&1 == 1 {
					c.fill(image.Rect(x+bit*scale, y+row*scale, x+(bit+1)*scale, y+(row+1)*scale), col)
				}
			}
		}
		x += 6 * scale
	}
}

// render draws the chart; the SVG has the same geometry.
func (c *Chart) render() (*image.RGBA, error) {
	if len(c.Panels) == 0 {
		return nil, errors.New("demo: chart has no panels")
	}
	W, H := c.Size()
	cv := canvas{image.NewRGBA(image.Rect(0, 0, W, H))}
	cv.fill(cv.img.Rect, colWhite)
	cv.text(marginLeft, 20, c.Title, 2, colBlack)
	for i, pan := range c.Panels {
		x0, y0, x1, y1 := c.plotRect(i)
		ym := c.yMax(i)
		cv.text(x0, y0-26, pan.Title, 2, colBlack)
		for k := 0; k <= yTicks; k++ {
			v := ym * float64(k) / yTicks
			_, py := c.toPixel(i, 0, v)
			cv.line(float64(x0), py, float64(x1), py, 1, colGrid, 0)
			l := tickLabel(v)
			cv.text(x0-8-textWidth(l, 2), int(py)-7, l, 2, colBlack)
		}
		for _, t := range c.xTicks() {
			px, _ := c.toPixel(i, t, 0)
			cv.line(px, float64(y0), px, float64(y1), 1, colGrid, 0)
			l := tickLabel(t)
			cv.text(int(px)-textWidth(l, 2)/2, y1+8, l, 2, colBlack)
		}
		cv.text(x0-8-textWidth(pan.YLabel, 2), y0-26, pan.YLabel, 2, colBlack)
		for k, m := range append(append([]Marker(nil), c.Markers...), pan.Markers...) {
			px, _ := c.toPixel(i, m.X, 0)
			cv.line(px, float64(y0), px, float64(y1), 2, m.Color, 8)
			cv.text(int(px)+5, y0+5+markerRow(k, len(c.Markers))*22, m.Label, 2, m.Color)
		}
		// The frame goes under the data, so a series at the axis top stays visible.
		cv.line(float64(x0), float64(y0), float64(x1), float64(y0), 1, colBlack, 0)
		cv.line(float64(x0), float64(y1), float64(x1), float64(y1), 1, colBlack, 0)
		cv.line(float64(x0), float64(y0), float64(x0), float64(y1), 1, colBlack, 0)
		cv.line(float64(x1), float64(y0), float64(x1), float64(y1), 1, colBlack, 0)
		for _, s := range pan.Series {
			dash := 0
			if s.Dashed {
				dash = 10
			}
			for k := 1; k < len(s.X); k++ {
				ax, ay := c.toPixel(i, s.X[k-1], s.Y[k-1])
				bx, by := c.toPixel(i, s.X[k], s.Y[k])
				cv.line(ax, ay, bx, by, 2, s.Color, dash)
			}
			if len(s.X) == 1 {
				px, py := c.toPixel(i, s.X[0], s.Y[0])
				cv.line(px, py, px, py, 3, s.Color, 0)
			}
		}
		for k, s := range pan.Series {
			ly := y0 + 10 + k*22
			dash := 0
			if s.Dashed {
				dash = 6
			}
			cv.line(float64(x1+12), float64(ly), float64(x1+40), float64(ly), 3, s.Color, dash)
			cv.text(x1+46, ly-7, s.Name, 2, colBlack)
		}
	}
	_, _, _, yb := c.plotRect(len(c.Panels) - 1)
	cv.text((marginLeft+chartWidth-marginRight)/2-textWidth(c.XLabel, 2)/2, yb+34, c.XLabel, 2, colBlack)
	return cv.img, nil
}

// WritePNG encodes the chart as a PNG.
func (c *Chart) WritePNG(w io.Writer) error {
	img, err := c.render()
	if err != nil {
		return err
	}
	return png.Encode(w, img)
}

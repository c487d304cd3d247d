// Command chart draws the handoff latencies that BenchmarkHandoff wrote
// (PGADVISORY_BENCH_OUT) as a PNG: one panel per server and driver, each
// variant's latencies as a cumulative distribution on a logarithmic time
// axis from 100 µs to 1 s.
//
//	go run ./chart -in handoff.json -out ../../docs/handoff.png
//
// With -scaling it draws instead the Locker's cost per key against the
// keys it holds, from what BenchmarkLockerScaling wrote
// (PGADVISORY_SCALING_OUT): see scaling.go.
//
//	go run ./chart -scaling -in scaling.json -out ../../docs/locker-scaling.png
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"slices"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

const (
	panelW, panelH = 520, 300
	margin         = 50 // left and bottom, for the axes' labels
	top            = 24 // for the panel's title
	minT, maxT     = 1e5, 1e9
)

// colors of the variants, in the order of the legend.
var colors = []struct {
	name string
	c    color.RGBA
}{
	{"raw", color.RGBA{0x55, 0x55, 0x55, 0xff}},
	{"raw-param", color.RGBA{0xaa, 0xaa, 0xaa, 0xff}},
	{"library", color.RGBA{0x1f, 0x77, 0xb4, 0xff}},
	{"polling", color.RGBA{0xff, 0x7f, 0x0e, 0xff}},
	{"redsync", color.RGBA{0xd6, 0x27, 0x28, 0xff}},
}

func main() {
	in := flag.String("in", "handoff.json", "the samples BenchmarkHandoff wrote")
	out := flag.String("out", "handoff.png", "the PNG to write")
	scaling := flag.Bool("scaling", false, "draw the Locker's cost per key that BenchmarkLockerScaling wrote")
	flag.Parse()
	draw := run
	if *scaling {
		draw = runScaling
	}
	if err := draw(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var groups map[string]map[string][]int64
	if err := json.Unmarshal(b, &groups); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if len(groups) == 0 {
		return fmt.Errorf("%s: no samples", in)
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	slices.Sort(names)
	cols := min(2, len(names))
	rows := (len(names) + cols - 1) / cols
	img := image.NewRGBA(image.Rect(0, 0, cols*panelW, rows*panelH+30))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	for i, g := range names {
		panel(img, image.Pt(i%cols*panelW, i/cols*panelH), g, groups[g])
	}
	legend(img, rows*panelH+20)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// panel draws one group's distributions with its top left corner at o.
func panel(img *image.RGBA, o image.Point, title string, variants map[string][]int64) {
	x0, y0 := o.X+margin, o.Y+panelH-margin/2-10 // the axes' origin
	w, h := panelW-margin-20, panelH-margin/2-10-top
	x := func(ns float64) int {
		return x0 + int(float64(w)*(math.Log10(ns)-math.Log10(minT))/(math.Log10(maxT)-math.Log10(minT)))
	}
	y := func(q float64) int { return y0 - int(float64(h)*q) }
	grey := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	for _, t := range []struct {
		ns    float64
		label string
	}{{1e5, "100us"}, {1e6, "1ms"}, {1e7, "10ms"}, {1e8, "100ms"}, {1e9, "1s"}} {
		line(img, x(t.ns), y(0), x(t.ns), y(1), grey)
		text(img, x(t.ns)-14, y0+16, t.label)
	}
	for _, q := range []float64{0, 0.5, 1} {
		line(img, x0, y(q), x0+w, y(q), grey)
		text(img, o.X+8, y(q)+4, fmt.Sprintf("%.0f%%", q*100))
	}
	text(img, x0, o.Y+16, title+": share of handoffs done within t")
	for _, v := range colors {
		ns := slices.Clone(variants[v.name])
		if len(ns) == 0 {
			continue
		}
		slices.Sort(ns)
		px, py := x0, y(0)
		for i, d := range ns {
			t := math.Min(math.Max(float64(d), minT), maxT)
			cx, cy := x(t), y(float64(i+1)/float64(len(ns)))
			line(img, px, py, cx, py, v.c)
			line(img, cx, py, cx, cy, v.c)
			px, py = cx, cy
		}
	}
}

// legend draws the variants' colors along the bottom, at height yy.
func legend(img *image.RGBA, yy int) {
	xx := margin
	for _, v := range colors {
		for d := range 3 {
			line(img, xx, yy-4+d, xx+20, yy-4+d, v.c)
		}
		text(img, xx+26, yy, v.name)
		xx += 40 + 8*len(v.name)
	}
}

// line draws a straight line from (x1, y1) to (x2, y2).
func line(img *image.RGBA, x1, y1, x2, y2 int, c color.Color) {
	n := max(abs(x2-x1), abs(y2-y1), 1)
	for i := 0; i <= n; i++ {
		img.Set(x1+(x2-x1)*i/n, y1+(y2-y1)*i/n, c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// text writes s with its baseline starting at (x, y).
func text(img *image.RGBA, x, y int, s string) {
	d := font.Drawer{Dst: img, Src: image.Black, Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

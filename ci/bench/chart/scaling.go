package main

import (
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"slices"
)

// A scalingPoint is one run of BenchmarkLockerScaling, as it writes it.
type scalingPoint struct {
	Group     string  `json:"group"`
	Config    string  `json:"config"`
	Keys      int     `json:"keys"`
	AcquireUS float64 `json:"acquire_us"`
	ReleaseUS float64 `json:"release_us"`
}

// The axes of a scaling panel: keys held from 1,000 to 100,000, and the
// cost per key from 10 µs to 10 ms, both logarithmic.
const (
	minKeys, maxKeys = 1e3, 1e5
	minUS, maxUS     = 10, 1e4
)

// scalingSeries are the lines of a scaling panel, in the order of the
// legend: a configuration and a measure.
var scalingSeries = []struct {
	label, config string
	release       bool
	c             color.RGBA
}{
	{"default acquire", "default", false, color.RGBA{0xd6, 0x27, 0x28, 0xff}},
	{"default release", "default", true, color.RGBA{0xff, 0x98, 0x96, 0xff}},
	{"MaxConns=n/1000 acquire", "maxconns=n/1000", false, color.RGBA{0x1f, 0x77, 0xb4, 0xff}},
	{"MaxConns=n/1000 release", "maxconns=n/1000", true, color.RGBA{0xae, 0xc7, 0xe8, 0xff}},
}

// runScaling draws the per-key acquire and release times that
// BenchmarkLockerScaling wrote to in as a PNG at out: a panel per server
// and driver, a line per configuration and measure, the median of the
// runs at each number of keys.
func runScaling(in, out string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var points []scalingPoint
	if err := json.Unmarshal(b, &points); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	groups := map[string][]scalingPoint{}
	for _, p := range points {
		groups[p.Group] = append(groups[p.Group], p)
	}
	if len(groups) == 0 {
		return fmt.Errorf("%s: no runs", in)
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	slices.Sort(names)
	cols := min(2, len(names))
	rows := (len(names) + cols - 1) / cols
	img := image.NewRGBA(image.Rect(0, 0, cols*panelW, rows*panelH+50))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	for i, g := range names {
		scalingPanel(img, image.Pt(i%cols*panelW, i/cols*panelH), g, groups[g])
	}
	xx, yy := margin, rows*panelH+16
	for _, s := range scalingSeries {
		if xx+40+7*len(s.label) > img.Bounds().Dx() {
			xx, yy = margin, yy+20
		}
		for d := range 3 {
			line(img, xx, yy-4+d, xx+20, yy-4+d, s.c)
		}
		text(img, xx+26, yy, s.label)
		xx += 40 + 7*len(s.label)
	}
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

// scalingPanel draws one group's lines with its top left corner at o.
func scalingPanel(img *image.RGBA, o image.Point, title string, points []scalingPoint) {
	x0, y0 := o.X+margin, o.Y+panelH-margin/2-10
	w, h := panelW-margin-20, panelH-margin/2-10-top
	x := func(keys float64) int {
		return x0 + int(float64(w)*(math.Log10(keys)-math.Log10(minKeys))/(math.Log10(maxKeys)-math.Log10(minKeys)))
	}
	y := func(us float64) int {
		us = math.Min(math.Max(us, minUS), maxUS)
		return y0 - int(float64(h)*(math.Log10(us)-math.Log10(minUS))/(math.Log10(maxUS)-math.Log10(minUS)))
	}
	grey := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	for _, t := range []struct {
		keys  float64
		label string
	}{{1e3, "1k"}, {3e3, "3k"}, {1e4, "10k"}, {3e4, "30k"}, {1e5, "100k"}} {
		line(img, x(t.keys), y(minUS), x(t.keys), y(maxUS), grey)
		text(img, x(t.keys)-10, y0+16, t.label)
	}
	for _, t := range []struct {
		us    float64
		label string
	}{{10, "10us"}, {100, "100us"}, {1000, "1ms"}, {10000, "10ms"}} {
		line(img, x0, y(t.us), x0+w, y(t.us), grey)
		text(img, o.X+4, y(t.us)+4, t.label)
	}
	text(img, x0, o.Y+16, title+": time per key against keys held")
	for _, s := range scalingSeries {
		byKeys := map[int][]float64{}
		for _, p := range points {
			if p.Config != s.config {
				continue
			}
			v := p.AcquireUS
			if s.release {
				v = p.ReleaseUS
			}
			byKeys[p.Keys] = append(byKeys[p.Keys], v)
		}
		keys := make([]int, 0, len(byKeys))
		for k := range byKeys {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		px, py := -1, -1
		for _, k := range keys {
			vs := byKeys[k]
			slices.Sort(vs)
			cx, cy := x(float64(k)), y(vs[len(vs)/2])
			for dx := -2; dx <= 2; dx++ {
				line(img, cx+dx, cy-2, cx+dx, cy+2, s.c)
			}
			if px >= 0 {
				line(img, px, py, cx, cy, s.c)
				line(img, px, py+1, cx, cy+1, s.c)
			}
			px, py = cx, cy
		}
	}
}

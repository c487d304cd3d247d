package main

import (
	"fmt"
	"slices"
	"strings"
)

// median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// spread renders the median of xs and its range: "1.023 (0.991–1.061)".
func spread(xs []float64) string {
	if len(xs) == 0 {
		return "—"
	}
	if len(xs) == 1 {
		return fmt.Sprintf("%.3f", xs[0])
	}
	return fmt.Sprintf("%.3f (%.3f–%.3f)", median(xs), slices.Min(xs), slices.Max(xs))
}

// micros renders a time in ns as µs.
func micros(ns float64) string {
	switch {
	case ns == 0:
		return "—"
	case ns >= 100e3:
		return fmt.Sprintf("%.0f µs", ns/1e3)
	}
	return fmt.Sprintf("%.1f µs", ns/1e3)
}

// ratios returns num[i] / den[i] for every i they both have.
func ratios(num, den []float64) []float64 {
	n := min(len(num), len(den))
	out := make([]float64, 0, n)
	for i := range n {
		if den[i] != 0 {
			out = append(out, num[i]/den[i])
		}
	}
	return out
}

// table renders a Markdown table.
func table(header []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n|")
	for range header {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

// driverRank orders drivers as the tables list them.
func driverRank(d string) int {
	switch d {
	case "pq":
		return 0
	case "pq-binary":
		return 1
	case "pgx":
		return 2
	}
	return 3
}

// sortGroups sorts "server/driver[/rest]" groups by server, then driver
// (pq, pq-binary, pgx), then the rest.
func sortGroups(gs []string) {
	slices.SortFunc(gs, func(a, b string) int {
		pa, pb := strings.SplitN(a, "/", 3), strings.SplitN(b, "/", 3)
		for len(pa) < 3 {
			pa = append(pa, "")
		}
		for len(pb) < 3 {
			pb = append(pb, "")
		}
		if c := strings.Compare(pa[0], pb[0]); c != 0 {
			return c
		}
		if c := driverRank(pa[1]) - driverRank(pb[1]); c != 0 {
			return c
		}
		return strings.Compare(pa[2], pb[2])
	})
}

// mark renders v against a goal: at most limit (atMost), or at least.
func mark(v, limit float64, atMost bool) string {
	if v == 0 {
		return "—"
	}
	ok := v <= limit
	if !atMost {
		ok = v >= limit
	}
	if ok {
		return fmt.Sprintf("%.3f, met", v)
	}
	return fmt.Sprintf("**%.3f, not met**", v)
}

// A target is a row of a targets table: its name, and how to fill its
// cell in each column.
type target[C any] struct {
	name string
	cell func(c C) string
}

// targetsTable renders one row per target, with a cell for each of cols.
func targetsTable[C any](header []string, cols []C, targets []target[C]) string {
	var rows [][]string
	for _, t := range targets {
		row := []string{t.name}
		for _, c := range cols {
			row = append(row, t.cell(c))
		}
		rows = append(rows, row)
	}
	return table(header, rows)
}

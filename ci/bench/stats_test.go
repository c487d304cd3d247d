package bench_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// quantile returns the q-quantile of xs (nearest rank), or 0 for none.
func quantile[T int64 | float64 | time.Duration](xs []T, q float64) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q * float64(len(s)-1))
	return s[i]
}

// spread is the median, least and greatest of a ratio over the repeats.
type spread struct{ med, lo, hi float64 }

func spreadOf(xs []float64) spread {
	return spread{quantile(xs, 0.5), slices.Min(xs), slices.Max(xs)}
}

func (s spread) String() string { return fmt.Sprintf("%.3f (%.3f–%.3f)", s.med, s.lo, s.hi) }

// results collects the samples that ci/bench/chart draws: by group (a
// server and driver), by variant, every handoff's latency in ns.
var results = struct {
	sync.Mutex
	Handoff map[string]map[string][]int64
}{Handoff: map[string]map[string][]int64{}}

// addSamples records a variant's samples for the chart.
func addSamples(group, variant string, ds []time.Duration) {
	results.Lock()
	defer results.Unlock()
	g := results.Handoff[group]
	if g == nil {
		g = map[string][]int64{}
		results.Handoff[group] = g
	}
	for _, d := range ds {
		g[variant] = append(g[variant], d.Nanoseconds())
	}
}

// writeResults writes the samples to the file PGADVISORY_BENCH_OUT names,
// if any.
func writeResults(tb testing.TB) {
	path := os.Getenv("PGADVISORY_BENCH_OUT")
	if path == "" {
		return
	}
	results.Lock()
	defer results.Unlock()
	b, err := json.MarshalIndent(results.Handoff, "", " ")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// data collects every repeat's figures for ci/bench/report: by
// benchmark, group (a server and driver, "pg15/pq"), variant; and the
// version() of every server the benchmarks ran on, by name.
var data = struct {
	sync.Mutex
	M       map[string]map[string]map[string][]float64
	Servers map[string]string
}{M: map[string]map[string]map[string][]float64{}, Servers: map[string]string{}}

// noteServer records s's version() for ci/bench/report.
func noteServer(b *testing.B, s *pgtest.Server) {
	b.Helper()
	var v string
	if err := s.Open(b, pgtest.DriverPQ).QueryRow("SELECT pg_catalog.version()").Scan(&v); err != nil {
		b.Fatal(err)
	}
	data.Lock()
	defer data.Unlock()
	data.Servers[s.Name] = v
}

// record adds one repeat's figure v of variant in group to bench's data.
func record(bench, group, variant string, v float64) {
	data.Lock()
	defer data.Unlock()
	g := data.M[bench]
	if g == nil {
		g = map[string]map[string][]float64{}
		data.M[bench] = g
	}
	if g[group] == nil {
		g[group] = map[string][]float64{}
	}
	g[group][variant] = append(g[group][variant], v)
}

// writeData writes the figures [record] collected, as JSON, to the file
// PGADVISORY_BENCH_DATA names, if any, for ci/bench/report.
func writeData() error {
	path := os.Getenv("PGADVISORY_BENCH_DATA")
	if path == "" {
		return nil
	}
	data.Lock()
	defer data.Unlock()
	b, err := json.MarshalIndent(map[string]any{"figures": data.M, "servers": data.Servers}, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// bestForm returns the figures of the best of names in m, the one whose
// median over the repeats is the least (or with most, the greatest), and
// its name: one form for all the repeats, not the best of each repeat,
// which under noise would be the luckiest of several and bias every ratio
// against the library.
func bestForm(m map[string][]float64, names []string, most bool) ([]float64, string) {
	who, b := "", 0.0
	for _, n := range names {
		if len(m[n]) == 0 {
			continue
		}
		x := quantile(m[n], 0.5)
		if who == "" || (most && x > b) || (!most && x < b) {
			who, b = n, x
		}
	}
	return m[who], who
}

// table renders rows as a Markdown table.
func table(header []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n|")
	for range header {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

package pgxlock_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// What the interleaved benchmarks against pgx by hand share: the seeded
// order of their variants, their repeats, and the median and range they
// report. BenchmarkCallsVsHand and BenchmarkXactScopeVsHand are in
// calls_bench_test.go, BenchmarkXactThroughputVsHand in
// throughput_bench_test.go, BenchmarkHandoffVsHand in
// handoff_bench_test.go. Each runs its whole measurement, benchRepeats
// repeats, once per b.N: run them with -benchtime=1x.

// benchRepeats is how many repeats each benchmark runs, the variants
// interleaved within each; it reports the median over the repeats and
// their range.
const benchRepeats = 7

// median returns the median of xs (the lower of the middle two), or 0 for
// none.
func median(xs []float64) float64 { return quantile(xs, 0.5) }

// quantile returns the q-quantile of xs (nearest rank), or 0 for none.
func quantile[T float64 | time.Duration](xs []T, q float64) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// A spread is the median, least and greatest of a figure over the
// repeats.
type spread struct{ med, lo, hi float64 }

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	return spread{median(xs), slices.Min(xs), slices.Max(xs)}
}

// ratios returns num[i]/den[i] for every repeat i.
func ratios(num, den []float64) []float64 {
	r := make([]float64, len(num))
	for i := range r {
		r[i] = num[i] / den[i]
	}
	return r
}

// format renders s with verb for each figure, as "med (lo–hi)".
func (s spread) format(verb string) string {
	return fmt.Sprintf(verb+" ("+verb+"–"+verb+")", s.med, s.lo, s.hi)
}

// loadAvg returns the machine's load average over 1, 5 and 15 minutes, as
// /proc/loadavg gives it, or "unknown" where there is none.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// mdTable renders rows as a Markdown table.
func mdTable(header []string, rows [][]string) string {
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

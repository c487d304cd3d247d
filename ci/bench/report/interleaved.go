package main

import (
	"fmt"
	"slices"
	"strings"
)

// advisoryPkg is the package of the lock benchmarks.
const advisoryPkg = "github.com/pgadvisory/pgadvisory/advisory"

// The variants of advisory's interleaved benchmarks are named after what
// they send: the library's calls (ours, observed, lock, ours-wait,
// ours-two), the forms by hand (exec-where-inline, query-select-param,
// exec-lock-inline, ..., and in BenchmarkInterleavedForm inline,
// inline-query, params, params-query), and the baseline; keyed variants end
// in -freshkey or -fixedkey.

// splitKey splits a variant's name into its base and its key suffix.
func splitKey(name string) (base, key string) {
	for _, k := range []string{"-freshkey", "-fixedkey"} {
		if b, ok := strings.CutSuffix(name, k); ok {
			return b, k
		}
	}
	return name, ""
}

// isHand reports whether a variant is SQL by hand.
func isHand(name string) bool {
	base, _ := splitKey(name)
	switch base {
	case "inline", "inline-query", "params", "params-query":
		return true
	}
	return strings.HasPrefix(base, "exec-") || strings.HasPrefix(base, "query-")
}

// ratioGroup is the group of variants a variant is set against: the
// library's try against the tries by hand, its wait against the blocking
// statement by hand, a scope with two tries against two tries by hand,
// each with the same kind of key. The baseline is in none.
func ratioGroup(name string) string {
	base, key := splitKey(name)
	switch {
	case base == "baseline":
		return ""
	case strings.HasSuffix(base, "-two"):
		return "two" + key
	case base == "lock" || base == "ours-wait" || strings.HasPrefix(base, "exec-lock"):
		return "lock" + key
	}
	return "try" + key
}

// variantRank orders the rows of an interleaved table: the library's
// calls, its own statement sent by hand (guarded), then the forms by
// hand, then the baseline.
func variantRank(name string) int {
	base, _ := splitKey(name)
	switch {
	case base == "ours":
		return 0
	case base == "observed":
		return 1
	case base == "lock", base == "ours-wait":
		return 2
	case base == "ours-two":
		return 3
	case base == "guarded":
		return 4
	case base == "baseline":
		return 9
	case strings.HasPrefix(base, "exec-lock"):
		return 6
	case strings.HasSuffix(base, "-two"):
		return 7
	}
	return 5
}

// interleavedRuns returns, for every group of the interleaved benchmark
// bench ("InterleavedTryLock"), every run's mean time per call of each
// variant.
func interleavedRuns(e *env, bench string) map[string][]map[string]float64 {
	out := map[string][]map[string]float64{}
	for name, samples := range e.interleaved[advisoryPkg] {
		group, ok := strings.CutPrefix(name, bench+"/")
		if !ok {
			continue
		}
		for _, s := range samples {
			run := map[string]float64{}
			for unit, v := range s {
				if variant, ok := strings.CutSuffix(unit, "-ns/call"); ok {
					run[variant] = v
				}
			}
			if len(run) > 0 {
				out[group] = append(out[group], run)
			}
		}
	}
	return out
}

// bestRatios returns, for every run, variant's time over that of the
// fastest form by hand of its group: the form whose median over the runs
// is the least ([fastestHand]). One form for all the runs, not the
// fastest of each run, which under noise would be the luckiest of several
// and bias the ratio against the library.
func bestRatios(runs []map[string]float64, variant string) []float64 {
	g := ratioGroup(variant)
	if g == "" {
		return nil
	}
	best, _ := fastestHand(runs, g)
	var out []float64
	for _, run := range runs {
		t, ok := run[variant]
		if b := run[best]; ok && b > 0 {
			out = append(out, t/b)
		}
	}
	return out
}

// fastestHand returns the form by hand of group g whose median time is the
// least over runs, and that median.
func fastestHand(runs []map[string]float64, g string) (string, float64) {
	times := map[string][]float64{}
	for _, run := range runs {
		for v, x := range run {
			if isHand(v) && ratioGroup(v) == g {
				times[v] = append(times[v], x)
			}
		}
	}
	name, best := "", 0.0
	for _, v := range sortedKeys(times) {
		if m := median(times[v]); best == 0 || m < best {
			name, best = v, m
		}
	}
	return name, best
}

// interleavedTable renders advisory's interleaved benchmark bench in e: a
// row per variant, a column per server and driver, each cell the median
// time per call over the runs and, but for the baseline, the time over the
// fastest form by hand of its group ([bestRatios]), median (range) over
// the runs; then which form by hand was fastest.
func interleavedTable(e *env, bench string) string {
	runs := interleavedRuns(e, bench)
	if len(runs) == 0 {
		return "_Not run._\n"
	}
	groups := sortedKeys(runs)
	sortGroups(groups)
	set := map[string]bool{}
	for _, g := range groups {
		for _, run := range runs[g] {
			for v := range run {
				set[v] = true
			}
		}
	}
	variants := sortedKeys(set)
	slices.SortStableFunc(variants, func(a, b string) int { return variantRank(a) - variantRank(b) })
	var rows [][]string
	for _, v := range variants {
		row := []string{"`" + v + "`"}
		for _, g := range groups {
			var times []float64
			for _, run := range runs[g] {
				if x, ok := run[v]; ok {
					times = append(times, x)
				}
			}
			switch {
			case len(times) == 0:
				row = append(row, "")
			case ratioGroup(v) == "":
				row = append(row, micros(median(times)))
			default:
				row = append(row, micros(median(times))+", "+spread(bestRatios(runs[g], v)))
			}
		}
		rows = append(rows, row)
	}
	keys := map[string]bool{}
	for _, v := range variants {
		if g := ratioGroup(v); g != "" && isHand(v) {
			keys[g] = true
		}
	}
	for _, k := range sortedKeys(keys) {
		row := []string{"fastest by hand, " + k}
		for _, g := range groups {
			name, _ := fastestHand(runs[g], k)
			if name != "" {
				name = "`" + name + "`"
			}
			row = append(row, name)
		}
		rows = append(rows, row)
	}
	n := 0
	if len(groups) > 0 {
		n = len(runs[groups[0]])
	}
	return table(append([]string{fmt.Sprintf("call (%d runs)", n)}, groups...), rows)
}

// formTable renders BenchmarkInterleavedForm in e: a row per server,
// driver and kind of op, the median time of each form of the library's
// statements, the fastest of them, and the library's call over the
// fastest form of each run.
func formTable(e *env) string {
	runs := interleavedRuns(e, "InterleavedForm")
	if len(runs) == 0 {
		return "_Not run._\n"
	}
	groups := sortedKeys(runs)
	sortGroups(groups)
	forms := []string{"inline", "inline-query", "params", "params-query"}
	var rows [][]string
	for _, g := range groups {
		row := []string{g}
		for _, v := range append([]string{"baseline"}, forms...) {
			var times []float64
			for _, run := range runs[g] {
				times = append(times, run[v])
			}
			row = append(row, micros(median(times)))
		}
		best, _ := fastestHand(runs[g], "try")
		row = append(row, "`"+best+"`", spread(bestRatios(runs[g], "ours")))
		rows = append(rows, row)
	}
	header := []string{"server/driver/op", "`SELECT 1`", "`inline`", "`inline-query`", "`params`", "`params-query`", "fastest form", "ours ÷ fastest form"}
	return table(header, rows)
}

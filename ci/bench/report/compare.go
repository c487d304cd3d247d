package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The tables of ci/bench's benchmarks, from the figures of every repeat
// that they recorded (data.json).

// handForms are the forms of the try by hand in ci/bench, as its
// benchmarks name them.
var handForms = []string{"exec-where-inline", "exec-where-param", "query-select-inline", "query-select-param", "query-where-inline", "query-where-param"}

// figureGroups returns the groups of bench in e, sorted.
func figureGroups(e *env, bench string) []string {
	gs := sortedKeys(e.figures.Figures[bench])
	sortGroups(gs)
	return gs
}

// bestOf returns the figures of the best of the variants names: the one
// whose median over the repeats is the least (or with most, the
// greatest), and its name. One variant for all the repeats, not the best
// of each repeat, which under noise would be the luckiest of several.
func bestOf(vs map[string][]float64, names []string, most bool) ([]float64, string) {
	who, b := "", 0.0
	for _, n := range names {
		if len(vs[n]) == 0 {
			continue
		}
		m := median(vs[n])
		if who == "" || (most && m > b) || (!most && m < b) {
			who, b = n, m
		}
	}
	if who == "" {
		return nil, ""
	}
	return vs[who], "`" + who + "`"
}

// handoffTable renders BenchmarkHandoff in e: per server and driver, the
// median p50 of the forms by hand, of the library and of the library's
// waiter released by the plain unlock, their p50 over the best form by
// hand of each repeat, polling's and redsync's, and the library's p99
// over all its handoffs.
func handoffTable(e *env) string {
	groups := figureGroups(e, "handoff")
	if len(groups) == 0 {
		return "_Not run._\n"
	}
	var rows [][]string
	for _, g := range groups {
		vs := e.figures.Figures["handoff"][g]
		best, _ := bestOf(vs, []string{"raw", "raw-param"}, false)
		p99 := e.figures.Figures["handoff-p99"][g]
		waiter, waiterRatio := "—", "—"
		if len(vs["library-waiter"]) > 0 {
			waiter, waiterRatio = micros(median(vs["library-waiter"])), spread(ratios(vs["library-waiter"], best))
		}
		rows = append(rows, []string{g,
			micros(median(vs["raw"])), micros(median(vs["raw-param"])), micros(median(vs["library"])), waiter,
			spread(ratios(vs["library"], best)), waiterRatio, spread(ratios(vs["polling"], best)), spread(ratios(vs["redsync"], best)),
			micros(median(p99["raw"])), micros(median(p99["library"])),
		})
	}
	return table([]string{"server/driver", "`raw` p50", "`raw-param` p50", "library p50", "`library-waiter` p50", "library ÷ best by hand",
		"`library-waiter` ÷ best", "polling ÷ best", "redsync ÷ best", "`raw` p99", "library p99"}, rows)
}

// throughputTables renders BenchmarkXactThroughput in e: per server and
// driver, the transactions per second of the best form by hand and of the
// library, and their ratios to each other and to pgbench; then every
// form's rate.
func throughputTables(e *env) string {
	groups := figureGroups(e, "throughput")
	if len(groups) == 0 {
		return "_Not run._\n"
	}
	var rows, forms [][]string
	for _, g := range groups {
		vs := e.figures.Figures["throughput"][g]
		best, who := bestOf(vs, handForms, true)
		native := "—"
		if len(vs["pgx-native"]) > 0 {
			native = spread(ratios(vs["pgx-native"], best))
		}
		rows = append(rows, []string{g,
			fmt.Sprintf("%.0f", median(best)), who, fmt.Sprintf("%.0f", median(vs["library"])), fmt.Sprintf("%.0f", median(vs["pgbench"])),
			spread(ratios(vs["library"], best)), native,
			spread(ratios(vs["library"], vs["pgbench"])), spread(ratios(best, vs["pgbench"])),
		})
	}
	for _, f := range handForms {
		row := []string{"`" + f + "`"}
		for _, g := range groups {
			row = append(row, fmt.Sprintf("%.0f", median(e.figures.Figures["throughput"][g][f])))
		}
		forms = append(forms, row)
	}
	t := table([]string{"server/driver", "best by hand, tx/s", "best form", "library tx/s", "pgbench tx/s",
		"library ÷ best by hand", "pgx-native ÷ best by hand", "library ÷ pgbench", "best by hand ÷ pgbench"}, rows)
	return t + "\nEvery form by hand, median tx/s:\n\n" + table(append([]string{"form"}, groups...), forms)
}

// middlewareTable renders BenchmarkMiddleware in e: per server and
// driver, the fastest handler by hand and the middleware, for one client
// (mean and median request) and 8 clients (wall time per request).
func middlewareTable(e *env) string {
	groups := figureGroups(e, "middleware-1")
	if len(groups) == 0 {
		return "_Not run._\n"
	}
	var rows [][]string
	for _, g := range groups {
		seq := e.figures.Figures["middleware-1"][g]
		p50 := e.figures.Figures["middleware-1-p50"][g]
		par := e.figures.Figures["middleware-8"][g]
		best, who := bestOf(seq, handForms, false)
		bestP50, whoP50 := bestOf(p50, handForms, false)
		bestPar, whoPar := bestOf(par, handForms, false)
		rows = append(rows, []string{g,
			fmt.Sprintf("%.0f µs", median(best)), fmt.Sprintf("%.0f µs", median(seq["middleware"])), who,
			spread(ratios(seq["middleware"], best)), spread(ratios(p50["middleware"], bestP50)) + " vs " + whoP50,
			spread(ratios(par["middleware"], bestPar)) + " vs " + whoPar,
		})
	}
	return table([]string{"server/driver", "one client: best by hand", "middleware", "fastest handler",
		"middleware ÷ best, mean request", "median request", "8 clients: middleware ÷ best"}, rows)
}

// waitOrderTable renders BenchmarkWaitOrder in e: per hold, the share of
// handoffs in turn and the longest a waiter was passed over, each with its
// range over the servers and drivers.
func waitOrderTable(e *env) string {
	groups := figureGroups(e, "waitorder-inturn")
	if len(groups) == 0 {
		return "_Not run._\n"
	}
	byHold := map[string]map[string][]float64{}
	var holds []string
	for _, g := range groups {
		i := strings.LastIndex(g, "/hold=")
		if i < 0 {
			continue
		}
		hold := g[i+len("/hold="):]
		if byHold[hold] == nil {
			byHold[hold] = map[string][]float64{}
			holds = append(holds, hold)
		}
		for _, v := range []string{"raw", "library"} {
			byHold[hold]["in-"+v] = append(byHold[hold]["in-"+v], e.figures.Figures["waitorder-inturn"][g][v]...)
			byHold[hold]["skip-"+v] = append(byHold[hold]["skip-"+v], e.figures.Figures["waitorder-skipped"][g][v]...)
		}
	}
	slices.SortFunc(holds, func(a, b string) int {
		da, _ := time.ParseDuration(a)
		db, _ := time.ParseDuration(b)
		return int(da - db)
	})
	var rows [][]string
	for _, h := range holds {
		m := byHold[h]
		rows = append(rows, []string{h, spread(m["in-raw"]), spread(m["in-library"]), spread(m["skip-raw"]), spread(m["skip-library"])})
	}
	return table([]string{"hold", "`raw` in-turn", "library in-turn", "`raw` skipped-max", "library skipped-max"}, rows)
}

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
)

// The benchmarks of pgx's own API (package pgxlock, ...VsHand) set pgxlock
// against pgx by hand. Each reports its medians as metrics and logs a
// table of medians and ranges; the page shows the targets from the
// metrics and the logged tables as they are.

// pgxPkg is pgxlock's import path, as go test names it in its output.
const pgxPkg = "github.com/pgadvisory/pgadvisory/pgxlock"

// A pgxLog is a table one of pgxlock's benchmarks logged, and the line
// that introduces it.
type pgxLog struct{ title, table string }

// logLine is the first line of a message a benchmark logged (go test -v):
// "    file_test.go:123: message".
var logLine = regexp.MustCompile(`^\s+\w+\.go:\d+: (.*)$`)

// readPgxLogs returns the tables logged in the go test -v output at path,
// each with the message that introduces it. A missing file has none.
func readPgxLogs(path string) ([]pgxLog, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []pgxLog
	var cur *pgxLog
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := logLine.FindStringSubmatch(line); m != nil {
			out = append(out, pgxLog{title: strings.TrimSuffix(m[1], ":")})
			cur = &out[len(out)-1]
			continue
		}
		if t := strings.TrimSpace(line); cur != nil && strings.HasPrefix(t, "|") {
			cur.table += t + "\n"
			continue
		}
		cur = nil
	}
	return slices.DeleteFunc(out, func(l pgxLog) bool { return l.table == "" }), sc.Err()
}

// pgxTables renders every table pgxlock's benchmarks logged in e, each
// after its own account of what it measured.
func pgxTables(e *env) string {
	if len(e.pgxLogs) == 0 {
		return "_Not run._\n"
	}
	var b strings.Builder
	for i, l := range e.pgxLogs {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s:\n\n%s", l.title, l.table)
	}
	return b.String()
}

// pgxServers returns the servers pgxlock's benchmarks ran on in e, from
// the names of BenchmarkXactScopeVsHand's runs ("XactScopeVsHand/pg15").
func pgxServers(e *env) []string {
	var out []string
	for name := range e.pgx[pgxPkg] {
		if s, ok := strings.CutPrefix(name, "XactScopeVsHand/"); ok {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// pgxMetric returns the median over the runs of bench of its metric
// unit, and whether there was one.
func pgxMetric(e *env, bench, unit string) (float64, bool) {
	var xs []float64
	for _, s := range e.pgx[pgxPkg][bench] {
		if v, ok := s[unit]; ok {
			xs = append(xs, v)
		}
	}
	return median(xs), len(xs) > 0
}

// pgxGoalsTable renders issue-style targets of pgxlock against pgx by
// hand, one column per environment and server.
func pgxGoalsTable(r *results) string {
	type col struct {
		e      *env
		server string
	}
	var cols []col
	header := []string{"target"}
	for _, e := range r.envs {
		for _, s := range pgxServers(e) {
			cols = append(cols, col{e, s})
			header = append(header, e.name+" "+s)
		}
	}
	if len(cols) == 0 {
		return "_Not run._\n"
	}
	ratio := func(bench, unit string, limit float64, atMost bool) func(c col) string {
		return func(c col) string {
			v, ok := pgxMetric(c.e, strings.ReplaceAll(bench, "SERVER", c.server), unit)
			if !ok {
				return "—"
			}
			return mark(v, limit, atMost)
		}
	}
	allocs := func(bench string) func(c col) string {
		return func(c col) string {
			v, ok := pgxMetric(c.e, strings.ReplaceAll(bench, "SERVER", c.server), "pgxlock-allocs-over-hand-same")
			if !ok {
				return "—"
			}
			if v > 2 {
				return fmt.Sprintf("**%+g, not met**", v)
			}
			return fmt.Sprintf("%+g, met", v)
		}
	}
	// The throughput against the faster of the transactions by hand: the
	// lower of pgxlock's ratios to them.
	throughput := func(c col) string {
		var worst float64
		for _, form := range []string{"BeginFunc-hand-same", "BeginFunc-hand-select"} {
			if v, ok := pgxMetric(c.e, "XactThroughputVsHand/"+c.server, "pgxlock/"+form); ok && (worst == 0 || v < worst) {
				worst = v
			}
		}
		return mark(worst, 0.97, false)
	}
	return targetsTable(header, cols, []target[col]{
		{"`TryLock`+`Unlock` ≤ 1.03× the same statements by hand", ratio("CallsVsHand/SERVER/TryLockUnlock", "pgxlock/hand-same", 1.03, true)},
		{"`TryXactLock` ≤ 1.03× the same statement by hand", ratio("CallsVsHand/SERVER/TryXactLock", "pgxlock/hand-same", 1.03, true)},
		{"allocations, `TryLock`+`Unlock`: ≤ 2 more than by hand", allocs("CallsVsHand/SERVER/TryLockUnlock")},
		{"allocations, `TryXactLock`: ≤ 2 more", allocs("CallsVsHand/SERVER/TryXactLock")},
		{"`WithXactLock(Try())` ≤ 1.03× `pgx.BeginFunc` with the same statement", ratio("XactScopeVsHand/SERVER", "pgxlock/BeginFunc-hand-same", 1.03, true)},
		{"8-client throughput ≥ 0.97× the faster `pgx.BeginFunc` by hand", throughput},
		{"8-client throughput, share of `pgbench -c 8`", func(c col) string {
			v, ok := pgxMetric(c.e, "XactThroughputVsHand/"+c.server, "pgxlock/pgbench")
			if !ok {
				return "—"
			}
			return fmt.Sprintf("%.3f", v)
		}},
		{"handoff p50 ≤ 1.05× the blocking statement by hand", ratio("HandoffVsHand/SERVER", "pgxlock/hand", 1.05, true)},
	})
}

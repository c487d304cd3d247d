package pgxlock_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/benchorder"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

const (
	// throughputClients is how many goroutines, connections and pgbench
	// clients run transactions at once.
	throughputClients = 8
	// throughputWindow is how long each variant runs in each repeat.
	throughputWindow = time.Second
)

// throughputScript is pgbench's transaction: a try of a random
// transaction lock, committed.
const throughputScript = `\set k random(1, 1000000000)
BEGIN;
SELECT pg_catalog.pg_try_advisory_xact_lock(:k);
COMMIT;
`

// A txVariant runs transactions with a try of a fresh transaction lock
// on a pool of its own.
type txVariant struct {
	name string
	hand bool
	pool *pgxpool.Pool
	run  func(ctx context.Context, k int64) error
	tps  []float64 // transactions per second in each repeat
}

// runWindow runs v's transaction on throughputClients goroutines for
// throughputWindow and returns the transactions per second. The
// goroutines stop between transactions, not by a context ending one:
// pgx closes a connection whose statement a context ends.
func runWindow(b *testing.B, v *txVariant, window time.Duration) float64 {
	ctx := context.Background()
	var stop atomic.Bool
	var n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range throughputClients {
		wg.Go(func() {
			for !stop.Load() {
				if err := v.run(ctx, benchKeys.Add(1)); err != nil {
					b.Errorf("%s: %v", v.name, err)
					return
				}
				n.Add(1)
			}
		})
	}
	time.Sleep(window)
	stop.Store(true)
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}

// pgbenchTPS is pgbench's report of its rate.
var pgbenchTPS = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// runPgbench runs script with pgbench on throughputClients connections
// for throughputWindow and returns its transactions per second.
func runPgbench(b *testing.B, pgbench, script, dsn string) float64 {
	out, err := exec.Command(pgbench, "-n", "-c", strconv.Itoa(throughputClients), "-j", "2",
		"-T", strconv.Itoa(int(throughputWindow/time.Second)), "-f", script, dsn).CombinedOutput()
	if err != nil {
		b.Fatalf("pgbench: %v\n%s", err, out)
	}
	m := pgbenchTPS.FindSubmatch(out)
	if m == nil {
		b.Fatalf("pgbench: no tps in its output:\n%s", out)
	}
	tps, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		b.Fatal(err)
	}
	return tps
}

// findPgbench returns the path of pgbench, on PATH or in a PostgreSQL
// installation of the host's, or "" when there is none.
func findPgbench() string {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p
	}
	if ps, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench"); len(ps) > 0 {
		return ps[len(ps)-1]
	}
	return ""
}

// BenchmarkXactThroughputVsHand measures transactions per second at 8
// clients, each transaction a try of a fresh transaction lock and a
// commit: pgxlock.WithXactLock with advisory.Try, fn doing nothing,
// against pgx.BeginFunc with the same statement by hand (see [handSame])
// and with "SELECT pg_catalog.pg_try_advisory_xact_lock($1)", each on a
// pool of its own of 8 connections, and against pgbench running the same
// transaction in C (the ceiling; left out, and said so, where pgbench is
// not installed). The variants run one window of throughputWindow each
// per repeat, in an order shuffled anew for every repeat from a logged
// seed (PGADVISORY_BENCH_SEED), benchRepeats repeats; it reports the
// median of each, pgxlock's ratio to each form by hand and its share of
// pgbench's, with their ranges over the repeats.
func BenchmarkXactThroughputVsHand(b *testing.B) {
	pgbench := findPgbench()
	script := filepath.Join(b.TempDir(), "try.sql")
	if err := os.WriteFile(script, []byte(throughputScript), 0o644); err != nil {
		b.Fatal(err)
	}
	noop := func(context.Context, pgx.Tx) error { return nil }
	clients := func(c *pgxpool.Config) { c.MaxConns, c.MinConns = throughputClients, throughputClients }
	for _, s := range pgtest.Servers(b) {
		b.Run(s.Name, func(b *testing.B) {
			for range b.N {
				lib := &txVariant{name: "pgxlock", pool: newPool(b, s.DSN, clients)}
				lib.run = func(ctx context.Context, k int64) error {
					return pgxlock.WithXactLock(ctx, lib.pool, advisory.Int64Key(k), noop, advisory.Try())
				}
				// Warm every connection up: the engine known, the
				// statements prepared.
				runWindow(b, lib, 200*time.Millisecond)
				same := preparedText(b, lib.pool, "pg_try_advisory_xact_lock")
				vs := []*txVariant{lib}
				for _, form := range []string{handSame, handSelect} {
					v := &txVariant{name: "BeginFunc-" + form, hand: true, pool: newPool(b, s.DSN, clients)}
					send, text := handForm(form, "pg_try_advisory_xact_lock", same)
					v.run = func(ctx context.Context, k int64) error {
						return pgx.BeginFunc(ctx, v.pool, func(tx pgx.Tx) error { return send(ctx, tx, text, k) })
					}
					runWindow(b, v, 200*time.Millisecond)
					vs = append(vs, v)
				}
				n := len(vs)
				var bench []float64
				if pgbench == "" {
					b.Log("pgbench is not installed: its share is left out (Debian's package postgresql holds it)")
				} else {
					n++ // pgbench is the variant numbered len(vs)
				}
				order := benchorder.New(b, n)
				for range benchRepeats {
					for _, i := range order.Next() {
						if i == len(vs) {
							bench = append(bench, runPgbench(b, pgbench, script, s.DSN))
							continue
						}
						vs[i].tps = append(vs[i].tps, runWindow(b, vs[i], throughputWindow))
					}
				}
				reportThroughput(b, s.Name, vs, bench)
			}
		})
	}
}

// reportThroughput reports each variant's median transactions per second
// and pgxlock's median ratio to each form by hand and to pgbench, and
// logs them as a table with their ranges and the load average.
func reportThroughput(b *testing.B, server string, vs []*txVariant, bench []float64) {
	lib := vs[0]
	var rows [][]string
	row := func(name string, tps []float64) {
		r := []string{name, spreadOf(tps).format("%.0f"), spreadOf(ratios(lib.tps, tps)).format("%.3f")}
		if bench != nil {
			r = append(r, spreadOf(ratios(tps, bench)).format("%.3f"))
		}
		rows = append(rows, r)
		b.ReportMetric(median(tps), name+"-tps")
	}
	for _, v := range vs {
		row(v.name, v.tps)
		if v.hand {
			b.ReportMetric(spreadOf(ratios(lib.tps, v.tps)).med, lib.name+"/"+v.name)
		}
	}
	header := []string{"variant", "transactions/s", "pgxlock ÷ it"}
	if bench != nil {
		row("pgbench", bench)
		header = append(header, "share of pgbench")
		b.ReportMetric(spreadOf(ratios(lib.tps, bench)).med, lib.name+"/pgbench")
	}
	b.Logf("%s, %d clients, %d repeats of %v windows, interleaved; median (range) over the repeats; load average %s:\n%s",
		server, throughputClients, len(lib.tps), throughputWindow, loadAvg(), mdTable(header, rows))
}

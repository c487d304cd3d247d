package bench_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/pgtest"
)

const (
	// clients is how many goroutines, connections and pgbench clients
	// run transactions at once.
	clients = 8
	// window is how long each variant runs in each repeat.
	window = 2 * time.Second
	// throughputRepeats is how many repeats, the variants interleaved.
	throughputRepeats = 5
)

// pgbenchScript is the transaction every variant runs: a try of a random
// transaction lock, committed.
const pgbenchScript = `\set k random(1, 1000000000)
BEGIN;
SELECT pg_try_advisory_xact_lock(:k);
COMMIT;
`

// A txVariant runs one transaction with a try of key k on db.
type txVariant struct {
	name    string
	pgxOnly bool // worth running on pgx alone
	run     func(ctx context.Context, db *sql.DB, k int64) error
}

// rawTx runs BEGIN, query with args, COMMIT.
func rawTx(ctx context.Context, db *sql.DB, query string, args ...any) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, query, args...); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

var txVariants = []txVariant{
	{"raw", false, func(ctx context.Context, db *sql.DB, k int64) error {
		return rawTx(ctx, db, "SELECT pg_try_advisory_xact_lock("+strconv.FormatInt(k, 10)+")")
	}},
	// The $1 form, which pgx runs from a statement it prepared once per
	// connection; on lib/pq it takes two round trips.
	{"raw-param", true, func(ctx context.Context, db *sql.DB, k int64) error {
		return rawTx(ctx, db, "SELECT pg_try_advisory_xact_lock($1)", k)
	}},
	{"library", false, func(ctx context.Context, db *sql.DB, k int64) error {
		return advisory.WithXactLock(ctx, db, advisory.Int64Key(k), func(context.Context, *sql.Tx) error { return nil }, advisory.Try())
	}},
}

// BenchmarkXactThroughput measures transactions per second at 8 clients,
// each transaction a try of a random transaction lock: WithXactLock(Try())
// against the same transaction written by hand on the same driver, and
// against pgbench running the same script in the same window (C and
// libpq, the ceiling). The variants interleave within each repeat; it
// reports the median of each and the library's ratios, with their ranges.
// Each b.N runs throughputRepeats repeats; run it with -benchtime=1x.
func BenchmarkXactThroughput(b *testing.B) {
	pgbench := findPgbench(b)
	script := filepath.Join(b.TempDir(), "try.sql")
	if err := os.WriteFile(script, []byte(pgbenchScript), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, s := range pgtest.Servers(b) {
		for _, driver := range []string{pgtest.DriverPQ, pgtest.DriverPGX} {
			b.Run(s.Name+"/"+driver, func(b *testing.B) {
				db := s.Open(b, driver)
				db.SetMaxOpenConns(clients)
				db.SetMaxIdleConns(clients)
				tps := map[string][]float64{}
				for range b.N * throughputRepeats {
					for _, v := range txVariants {
						if v.pgxOnly && driver != pgtest.DriverPGX {
							continue
						}
						tps[v.name] = append(tps[v.name], runClients(b, db, v))
					}
					tps["pgbench"] = append(tps["pgbench"], runPgbench(b, pgbench, script, s.DSN))
				}
				// "raw" is the best hand-written form of each repeat.
				ratio := func(den string) spread {
					r := make([]float64, len(tps["library"]))
					for i := range r {
						d := tps[den][i]
						if den == "raw" && len(tps["raw-param"]) > 0 {
							d = max(d, tps["raw-param"][i])
						}
						r[i] = tps["library"][i] / d
					}
					return spreadOf(r)
				}
				var rows [][]string
				for _, name := range []string{"raw", "raw-param", "library", "pgbench"} {
					if len(tps[name]) == 0 {
						continue
					}
					med := quantile(tps[name], 0.5)
					b.ReportMetric(med, name+"-tx/s")
					rows = append(rows, []string{name, fmt.Sprintf("%.0f", med),
						fmt.Sprintf("%.0f–%.0f", quantile(tps[name], 0), quantile(tps[name], 1))})
				}
				raw, bench := ratio("raw"), ratio("pgbench")
				b.ReportMetric(raw.med, "library/raw")
				b.ReportMetric(bench.med, "library/pgbench")
				b.Logf("%s/%s, %d clients, %d repeats of %v each:\n%s\nlibrary ÷ best hand-written %v; library ÷ pgbench %v",
					s.Name, driver, clients, len(tps["raw"]), window,
					table([]string{"variant", "tx/s (median)", "range"}, rows), raw, bench)
			})
		}
	}
}

// runClients runs v on clients goroutines for window and returns the
// transactions per second.
func runClients(b *testing.B, db *sql.DB, v txVariant) float64 {
	n, took := onClients(b, window, func() error {
		if err := v.run(context.Background(), db, rand.Int64N(1_000_000_000)+1); err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		return nil
	})
	return float64(n) / took.Seconds()
}

// onClients calls op in a loop on clients goroutines for d, and returns
// how many calls succeeded and how long they all took. A goroutine whose
// call fails fails b and stops.
func onClients(b *testing.B, d time.Duration, op func() error) (int64, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := op(); err != nil {
					b.Error(err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return n.Load(), time.Since(start)
}

// tpsLine is pgbench's report of its rate.
var tpsLine = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// runPgbench runs script with pgbench on clients connections for window
// and returns its transactions per second.
func runPgbench(b *testing.B, pgbench, script, dsn string) float64 {
	out, err := exec.Command(pgbench, "-n", "-c", strconv.Itoa(clients), "-j", "2",
		"-T", strconv.Itoa(int(window/time.Second)), "-f", script, dsn).CombinedOutput()
	if err != nil {
		b.Fatalf("pgbench: %v\n%s", err, out)
	}
	m := tpsLine.FindSubmatch(out)
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
// installation of the host's, and fails b when there is none: ci/bench.sh
// installs Debian's package when it can.
func findPgbench(b *testing.B) string {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p
	}
	if ps, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench"); len(ps) > 0 {
		return ps[len(ps)-1]
	}
	b.Fatal("bench: pgbench not found on PATH or in /usr/lib/postgresql/*/bin: install Debian's package postgresql, which holds it")
	return ""
}

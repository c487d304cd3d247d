package bench_test

import (
	"context"
	"database/sql"
	"errors"
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

	"github.com/pgadvisory/pgadvisory/internal/benchorder"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
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
SELECT pg_catalog.pg_try_advisory_xact_lock(:k);
COMMIT;
`

// A txVariant runs one transaction with a try of key k on c.
type txVariant struct {
	name    string
	hand    bool // by hand through database/sql, which the library is set against
	pgxOnly bool // worth running on pgx alone
	run     func(ctx context.Context, c txClient, k int64) error
}

// A txClient is what a variant runs on: a *sql.DB, and on pgx a pool of
// pgx's own beside it, the same size, for the variant that leaves
// database/sql out.
type txClient struct {
	db   *sql.DB
	pool *pgxpool.Pool
}

// A handForm is one way to write the try by hand: through ExecContext,
// reading the answer from RowsAffected, or QueryRowContext, scanning it;
// as "SELECT 1 WHERE f(k)" or "SELECT f(k)"; the key in the text or as
// $1. ExecContext with the plain SELECT has no answer to read.
type handForm struct {
	name                string
	query, where, param bool
}

// handForms are every [handForm].
var handForms = []handForm{
	{"exec-where-inline", false, true, false},
	{"exec-where-param", false, true, true},
	{"query-select-inline", true, false, false},
	{"query-select-param", true, false, true},
	{"query-where-inline", true, true, false},
	{"query-where-param", true, true, true},
}

// try sends a try of the transaction lock k in form f on tx and reports
// whether it took the lock.
func (f handForm) try(ctx context.Context, tx *sql.Tx, k int64) (bool, error) {
	text := "pg_catalog.pg_try_advisory_xact_lock($1)"
	var args []any
	if f.param {
		args = []any{k}
	} else {
		text = "pg_catalog.pg_try_advisory_xact_lock(" + strconv.FormatInt(k, 10) + ")"
	}
	switch {
	case !f.query:
		res, err := tx.ExecContext(ctx, "SELECT 1 WHERE "+text, args...)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n == 1, err
	case f.where:
		var one int
		err := tx.QueryRowContext(ctx, "SELECT 1 WHERE "+text, args...).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}
	var ok bool
	err := tx.QueryRowContext(ctx, "SELECT "+text, args...).Scan(&ok)
	return ok, err
}

// byHand runs BEGIN, a try of k in form f, COMMIT.
func byHand(ctx context.Context, db *sql.DB, f handForm, k int64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := f.try(ctx, tx, k); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// txVariants are the transactions BenchmarkXactThroughput compares: the
// library's, the same by hand in every form, and on pgx the same through
// pgx's own API.
var txVariants = append([]txVariant{
	{"library", false, false, func(ctx context.Context, c txClient, k int64) error {
		return advisory.WithXactLock(ctx, c.db, advisory.Int64Key(k), func(context.Context, *sql.Tx) error { return nil }, advisory.Try())
	}},
	// The same transaction through pgx's own API, without database/sql:
	// what a Go client can reach when it gives database/sql up, which
	// this library's design does not.
	{"pgx-native", false, true, func(ctx context.Context, c txClient, k int64) error {
		tx, err := c.pool.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT pg_catalog.pg_try_advisory_xact_lock($1)", k); err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		return tx.Commit(ctx)
	}},
}, handTxVariants()...)

// handTxVariants returns a variant for every form of handForms.
func handTxVariants() []txVariant {
	var vs []txVariant
	for _, f := range handForms {
		vs = append(vs, txVariant{f.name, true, false, func(ctx context.Context, c txClient, k int64) error {
			return byHand(ctx, c.db, f, k)
		}})
	}
	return vs
}

// BenchmarkXactThroughput measures transactions per second at 8 clients,
// each transaction a try of a random transaction lock: WithXactLock(Try())
// against the same transaction written by hand on the same driver in every
// form, and against pgbench running the same script in the same window (C
// and libpq, the ceiling). The variants run one window each per repeat, in
// an order shuffled anew for every repeat from a seed
// (PGADVISORY_BENCH_SEED); it reports the median of each and the library's
// ratios to the best form by hand (the one whose median is the greatest)
// and to pgbench, repeat by repeat, with their ranges. Each b.N runs throughputRepeats repeats; run it with
// -benchtime=1x.
func BenchmarkXactThroughput(b *testing.B) {
	pgbench := findPgbench(b)
	script := filepath.Join(b.TempDir(), "try.sql")
	if err := os.WriteFile(script, []byte(pgbenchScript), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, s := range pgtest.Servers(b) {
		noteServer(b, s)
		for _, driver := range []string{pgtest.DriverPQ, pgtest.DriverPGX} {
			b.Run(s.Name+"/"+driver, func(b *testing.B) {
				c := txClient{db: s.Open(b, driver)}
				c.db.SetMaxOpenConns(clients)
				c.db.SetMaxIdleConns(clients)
				if driver == pgtest.DriverPGX {
					c.pool = openPgxPool(b, s.DSN)
				}
				var vs []txVariant
				for _, v := range txVariants {
					if !v.pgxOnly || driver == pgtest.DriverPGX {
						vs = append(vs, v)
					}
				}
				group := s.Name + "/" + driver
				rng := benchorder.Rand(b)
				tps := map[string][]float64{}
				for range b.N * throughputRepeats {
					// pgbench is the variant numbered len(vs).
					for _, i := range rng.Perm(len(vs) + 1) {
						if i == len(vs) {
							tps["pgbench"] = append(tps["pgbench"], runPgbench(b, pgbench, script, s.DSN))
							continue
						}
						tps[vs[i].name] = append(tps[vs[i].name], runClients(b, c, vs[i]))
					}
				}
				// best is the rate of the best transaction through
				// database/sql by hand in each repeat.
				var hand []string
				for _, v := range vs {
					if v.hand {
						hand = append(hand, v.name)
					}
				}
				tps["best"], _ = bestForm(tps, hand, true)
				for name, ts := range tps {
					for _, t := range ts {
						record("throughput", group, name, t)
					}
				}
				ratio := func(num, den string) spread {
					r := make([]float64, len(tps[num]))
					for i := range r {
						r[i] = tps[num][i] / tps[den][i]
					}
					return spreadOf(r)
				}
				var rows [][]string
				names := []string{"library", "pgx-native", "pgbench", "best"}
				for _, f := range handForms {
					names = append(names, f.name)
				}
				for _, name := range names {
					if len(tps[name]) == 0 {
						continue
					}
					med := quantile(tps[name], 0.5)
					b.ReportMetric(med, name+"-tx/s")
					rows = append(rows, []string{name, fmt.Sprintf("%.0f", med),
						fmt.Sprintf("%.0f–%.0f", quantile(tps[name], 0), quantile(tps[name], 1))})
				}
				raw, bench, best := ratio("library", "best"), ratio("library", "pgbench"), ratio("best", "pgbench")
				b.ReportMetric(raw.med, "library/best")
				b.ReportMetric(bench.med, "library/pgbench")
				ceiling := ""
				if len(tps["pgx-native"]) > 0 {
					native := ratio("pgx-native", "pgbench")
					b.ReportMetric(native.med, "pgx-native/pgbench")
					ceiling = fmt.Sprintf("; pgx without database/sql ÷ pgbench %v", native)
				}
				b.Logf("%s/%s, %d clients, %d repeats of %v each:\n%s\nlibrary ÷ best hand-written %v; library ÷ pgbench %v; best hand-written ÷ pgbench %v%s",
					s.Name, driver, clients, len(tps["pgbench"]), window,
					table([]string{"variant", "tx/s (median)", "range"}, rows), raw, bench, best, ceiling)
			})
		}
	}
}

// runClients runs v on clients goroutines for window and returns the
// transactions per second.
func runClients(b *testing.B, c txClient, v txVariant) float64 {
	n, took := onClients(b, window, func() error {
		if err := v.run(context.Background(), c, rand.Int64N(1_000_000_000)+1); err != nil {
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

// openPgxPool opens a pool of pgx's own on dsn, clients connections, and
// closes it when b ends.
func openPgxPool(b *testing.B, dsn string) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns, cfg.MinConns = clients, clients
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

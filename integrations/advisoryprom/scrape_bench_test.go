package advisoryprom

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// The lock table of BenchmarkScrape: benchLocks exclusive pair locks,
// taken by benchSessions sessions, benchLocks/benchSessions each.
const (
	benchLocks    = 10_000
	benchSessions = 4
	benchNS       = 4242
)

// BenchmarkScrape measures one scrape, the query and the metrics it
// makes, with 10,000 advisory locks held by four sessions, and reports as
// server-ms/scrape the query's execution time on the server, the median
// of EXPLAIN ANALYZE's over several runs, and as pg_locks-ms the same for
// a bare count of pg_locks. docs/lockstate.md records the
// figures. The server is one of its own, with room in its lock table.
func BenchmarkScrape(b *testing.B) {
	for _, s := range pgtest.StartServer(b, "-c", "max_locks_per_transaction=256") {
		for _, driver := range pgtest.Drivers {
			b.Run(s.Name+"/"+driver, func(b *testing.B) {
				ctx := context.Background()
				tg := pgtest.NewDatabase(b, pgtest.Target{Server: s, Driver: driver, DB: s.Open(b, driver)}, pgtest.UniqueName("advisoryprom-bench-"))
				per := benchLocks / benchSessions
				for i := range benchSessions {
					conn := pgtest.Conn(b, tg.DB)
					pgtest.Exec(b, conn, `SELECT pg_catalog.count(pg_catalog.pg_advisory_lock($1::pg_catalog.int4, k)) FROM pg_catalog.generate_series($2::pg_catalog.int4, $3::pg_catalog.int4) k`,
						benchNS, i*per, (i+1)*per-1)
				}
				c := NewCollector(tg.DB)

				// Check once that the scrape sees them all.
				groups, err := read(ctx, tg.DB)
				if err != nil {
					b.Fatal(err)
				}
				var n int64
				for _, g := range groups {
					n += g.count
				}
				if n != benchLocks {
					b.Fatalf("the scrape sees %d locks, want %d", n, benchLocks)
				}

				ch := make(chan prometheus.Metric, 64)
				b.ResetTimer()
				for b.Loop() {
					go func() {
						c.Collect(ch)
						close(ch)
					}()
					for range ch {
					}
					ch = make(chan prometheus.Metric, 64)
				}
				b.StopTimer()
				b.ReportMetric(serverMillis(b, tg.DB, scrapeSQL), "server-ms/scrape")
				b.ReportMetric(serverMillis(b, tg.DB, pgLocksSQL), "pg_locks-ms")
			})
		}
	}
}

// pgLocksSQL reads the whole of pg_locks and nothing else: what any
// query of pg_locks costs, for comparison.
const pgLocksSQL = `SELECT pg_catalog.count(*) FROM pg_catalog.pg_locks`

// serverMillis returns the median of EXPLAIN ANALYZE's execution time of
// query over several runs, in milliseconds.
func serverMillis(b *testing.B, db pgtest.Querier, query string) float64 {
	b.Helper()
	var times []float64
	for range 9 {
		var plan string
		if err := db.QueryRowContext(context.Background(), "EXPLAIN (ANALYZE, FORMAT JSON) "+query).Scan(&plan); err != nil {
			b.Fatal(err)
		}
		var out []struct {
			ExecutionTime float64 `json:"Execution Time"`
		}
		if err := json.Unmarshal([]byte(plan), &out); err != nil || len(out) != 1 {
			b.Fatalf("EXPLAIN: %v: %s", err, plan)
		}
		times = append(times, out[0].ExecutionTime)
	}
	slices.Sort(times)
	return times[len(times)/2]
}

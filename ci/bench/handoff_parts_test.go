package bench_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/benchorder"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// textSide waits with one statement written by hand, through ExecContext,
// and releases as rawSide does: stmt's %[1]d is the key.
type textSide struct {
	rawSide
	stmt string
}

func (s textSide) lock(ctx context.Context) error {
	_, err := s.conn.ExecContext(ctx, fmt.Sprintf(s.stmt, s.key))
	return err
}

// handoffParts are the waits BenchmarkHandoffParts sets side by side: the
// blocking statement twice (the second, on connections of its own, shows
// the noise between two identical variants), then the parts of the
// slice for one session key in a transaction block
// (sqltext.SessionSliceStmt), one more at a time, and last the slice of a
// session with no transaction block open (sqltext.DirectSliceStmt), which
// does nothing after the grant.
var handoffParts = []struct{ name, stmt string }{
	{"raw", "SELECT pg_catalog.pg_advisory_lock(%[1]d)"},
	{"raw-again", "SELECT pg_catalog.pg_advisory_lock(%[1]d)"},
	{"bound+xact", "SELECT pg_catalog.set_config('lock_timeout', '1100', true), pg_catalog.pg_advisory_xact_lock(%[1]d)"},
	{"bound+xact+session", "SELECT pg_catalog.set_config('lock_timeout', '1100', true), pg_catalog.pg_advisory_xact_lock(%[1]d), pg_catalog.pg_advisory_lock(%[1]d)"},
	{"bound+xact+sleep+session", "SELECT pg_catalog.set_config('lock_timeout', '1100', true), pg_catalog.pg_advisory_xact_lock(%[1]d), pg_catalog.pg_sleep(0), pg_catalog.pg_advisory_lock(%[1]d)"},
	{"slice", strings.ReplaceAll(sqltext.SessionSliceStmt(sqltext.Inline, sqltext.Guarded, false, 1100, 0, sqltext.Key{Bigint: 4242}).Query, "4242", "%[1]d")},
	{"direct-slice", strings.ReplaceAll(sqltext.DirectSliceStmt(sqltext.Inline, sqltext.Guarded, false, 1100, sqltext.Key{Bigint: 4242}).Query, "4242", "%[1]d")},
}

// handoffPartsRepeats and handoffPartsPerRepeat size BenchmarkHandoffParts.
const (
	handoffPartsRepeats   = 5
	handoffPartsPerRepeat = 150
)

// BenchmarkHandoffParts measures where the handoff of a session lock's
// wait goes: each of handoffParts by hand, released by the plain unlock;
// the library's waiter (advisory.Lock) released by the plain unlock; and
// the library on both sides (advisory.Lock, advisory.Unlock), as
// BenchmarkHandoff runs it. Each variant's p50 per repeat over that of
// raw in the same repeat, median (range) over the repeats, interleaved as
// BenchmarkHandoff interleaves, on lib/pq and pgx. It is not part of
// ci/bench.sh's suite: run it with -benchtime=1x when the handoff ratio
// moves, and read raw-again first, which is the noise.
func BenchmarkHandoffParts(b *testing.B) {
	for _, s := range pgtest.Servers(b) {
		for _, driver := range []string{pgtest.DriverPQ, pgtest.DriverPGX} {
			b.Run(s.Name+"/"+driver, func(b *testing.B) {
				obs := s.Open(b, driver)
				db := s.Open(b, driver)
				conn := func() *sql.Conn { return pgtest.Conn(b, db) }
				base := rand.Int64N(1<<40) + 1
				variant := func(name string, k int64, holder, waiter side) *handoffVariant {
					return &handoffVariant{name: name, n: handoffPartsPerRepeat, holder: holder, waiter: waiter,
						waiting: func() { pgtest.AwaitQueued(b, obs, advisory.Int64Key(k), handoffSettle) }}
				}
				var vs []*handoffVariant
				for i, p := range handoffParts {
					k := base + int64(i)
					vs = append(vs, variant(p.name, k, rawSide{conn(), k, false}, textSide{rawSide{conn(), k, false}, p.stmt}))
				}
				k := base + int64(len(handoffParts))
				vs = append(vs,
					variant("library-waiter", k, rawSide{conn(), k, false}, libSide{conn(), advisory.Int64Key(k)}),
					variant("library", k+1, libSide{conn(), advisory.Int64Key(k + 1)}, libSide{conn(), advisory.Int64Key(k + 1)}))
				holdAll(b, vs)
				rng := benchorder.Rand(b)
				p50 := map[string][]float64{}
				for range b.N * handoffPartsRepeats {
					ds := map[string][]time.Duration{}
					for range handoffPartsPerRepeat {
						for _, j := range rng.Perm(len(vs)) {
							ds[vs[j].name] = append(ds[vs[j].name], handoff(b, vs[j]))
						}
					}
					for _, v := range vs {
						p50[v.name] = append(p50[v.name], float64(quantile(ds[v.name], 0.5)))
					}
				}
				var rows [][]string
				for _, v := range vs {
					r := make([]float64, len(p50[v.name]))
					for i := range r {
						r[i] = p50[v.name][i] / p50["raw"][i]
					}
					sp := spreadOf(r)
					b.ReportMetric(sp.med, v.name+"/raw")
					rows = append(rows, []string{v.name, fmt.Sprintf("%.0f µs", quantile(p50[v.name], 0.5)/1e3), sp.String()})
				}
				b.Logf("%s/%s, %d repeats of %d handoffs:\n%s", s.Name, driver, len(p50["raw"]), handoffPartsPerRepeat,
					table([]string{"variant", "p50", "÷ raw (range)"}, rows))
			})
		}
	}
}

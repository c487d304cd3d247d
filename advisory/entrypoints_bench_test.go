package advisory_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// The benchmark of the two forms of every lock call's statement, the key in
// the text or as a parameter, which no single API owns (see
// entrypoints_integration_test.go for the tests of every entry point
// alike).

// formVariants are what BenchmarkInterleavedForm compares on pgx: the
// library's own lock statements, guarded as every lock call sends them,
// in its two forms, the key in the text (Inline, the simple protocol,
// parsed and planned on every call) and as a parameter (Params, prepared
// once per connection), against the baseline and the library's call.
// Each op is a session TryLock and its Unlock, a transaction's TryXactLock
// inside an open transaction, or a whole WithXactLock with Try (begin,
// try, commit).
var formVariants = []struct {
	name    string
	session benchOp
	xact    benchOp
	scoped  func(ctx context.Context, db *sql.DB, k int64) error
}{
	{"baseline",
		func(ctx context.Context, h *benchHandle, _ int64) error {
			if err := execSelect1(ctx, h.conn); err != nil {
				return err
			}
			return execSelect1(ctx, h.conn)
		},
		func(ctx context.Context, h *benchHandle, _ int64) error { return execSelect1(ctx, h.tx) },
		func(ctx context.Context, db *sql.DB, _ int64) error {
			return byHandTx(ctx, db, func(tx *sql.Tx) error { return execSelect1(ctx, tx) })
		}},
	{"ours",
		func(ctx context.Context, h *benchHandle, k int64) error {
			key := advisory.Int64Key(k)
			if _, err := advisory.TryLock(ctx, h.conn, key); err != nil {
				return err
			}
			return advisory.Unlock(ctx, h.conn, key)
		},
		func(ctx context.Context, h *benchHandle, k int64) error {
			_, err := advisory.TryXactLock(ctx, h.tx, advisory.Int64Key(k))
			return err
		},
		func(ctx context.Context, db *sql.DB, k int64) error {
			return advisory.WithXactLock(ctx, db, advisory.Int64Key(k), noopTx, advisory.Try())
		}},
	{"inline", sessionForm(sqltext.Inline), xactForm(sqltext.Inline), scopedForm(sqltext.Inline)},
	{"params", sessionForm(sqltext.Params), xactForm(sqltext.Params), scopedForm(sqltext.Params)},
}

// sessionForm, xactForm and scopedForm send the library's statements in
// form f by hand.
func sessionForm(f sqltext.Form) benchOp {
	return func(ctx context.Context, h *benchHandle, k int64) error {
		key := sqltext.Key{Bigint: k}
		try := sqltext.TryLockStmt(f, sqltext.Guarded, false, false, key)
		if err := execOne(ctx, h.conn, try.Query, try.Args...); err != nil {
			return err
		}
		unlock := sqltext.UnlockStmt(f, false, key)
		return execOne(ctx, h.conn, unlock.Query, unlock.Args...)
	}
}

func xactForm(f sqltext.Form) benchOp {
	return func(ctx context.Context, h *benchHandle, k int64) error {
		s := sqltext.TryLockStmt(f, sqltext.Guarded, true, false, sqltext.Key{Bigint: k})
		return execOne(ctx, h.tx, s.Query, s.Args...)
	}
}

func scopedForm(f sqltext.Form) func(ctx context.Context, db *sql.DB, k int64) error {
	return func(ctx context.Context, db *sql.DB, k int64) error {
		s := sqltext.TryLockStmt(f, sqltext.Guarded, true, false, sqltext.Key{Bigint: k})
		return byHandTx(ctx, db, func(tx *sql.Tx) error { return execOne(ctx, tx, s.Query, s.Args...) })
	}
}

// BenchmarkInterleavedForm weighs the two forms of the lock statements on
// pgx, the one driver on which they differ (on lib/pq the Params form
// costs a second round trip): every variant runs once per op, each on a
// connection of its own, with a fresh key, and reports its mean time per
// call ("inline-ns/call"), as [BenchmarkInterleavedTryLock] does.
// docs/benchmarks.md gives the figures and the choice they led to.
func BenchmarkInterleavedForm(b *testing.B) {
	ctx := context.Background()
	for _, s := range pgtest.Servers(b) {
		b.Run(s.Name, func(b *testing.B) {
			open := func() *sql.DB {
				db, err := sql.Open("pgx", s.DSN)
				if err != nil {
					b.Fatal(err)
				}
				db.SetMaxOpenConns(1)
				b.Cleanup(func() { db.Close() })
				return db
			}
			for _, kind := range []string{"Session", "Xact", "Scoped"} {
				b.Run(kind, func(b *testing.B) {
					type call struct {
						h     *benchHandle
						db    *sql.DB
						total time.Duration
					}
					calls := make([]*call, len(formVariants))
					run := func(i int) error {
						v, c, k := formVariants[i], calls[i], freshKeys.Add(1)
						switch kind {
						case "Session":
							return v.session(ctx, c.h, k)
						case "Xact":
							return v.xact(ctx, c.h, k)
						}
						return v.scoped(ctx, c.db, k)
					}
					for i := range formVariants {
						c := &call{db: open()}
						if kind != "Scoped" {
							c.h = newBenchHandle(b, c.db, kind == "Xact")
							c.h.start(b)
						}
						calls[i] = c
						// Warm up: pgx prepares what it prepares.
						for range 3 {
							if err := run(i); err != nil {
								b.Fatal(err)
							}
						}
					}
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						for i, c := range calls {
							if c.h != nil {
								c.h.calls++
								if c.h.due() {
									b.StopTimer()
									c.h.finish(b)
									c.h.start(b)
									b.StartTimer()
								}
							}
							start := time.Now()
							if err := run(i); err != nil {
								b.Fatal(err)
							}
							c.total += time.Since(start)
						}
					}
					b.StopTimer()
					for i, c := range calls {
						if c.h != nil {
							c.h.finish(b)
						}
						b.ReportMetric(float64(c.total.Nanoseconds())/float64(b.N), formVariants[i].name+"-ns/call")
					}
				})
			}
		})
	}
}

package advisory_test

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// scopedVariants are the transactions BenchmarkInterleavedWithXactLock
// compares: WithXactLock with Try, and the same transaction by hand, with
// one try of a fresh key, or two ("-two": the scope's fn tries a second
// key in the scope's transaction).
var scopedVariants = []struct {
	name string
	op   func(ctx context.Context, db *sql.DB) error
}{
	{"baseline", func(ctx context.Context, db *sql.DB) error {
		return byHandTx(ctx, db, func(tx *sql.Tx) error { return execSelect1(ctx, tx) })
	}},
	{"ours", func(ctx context.Context, db *sql.DB) error {
		return advisory.WithXactLock(ctx, db, advisory.Int64Key(freshKeys.Add(1)), noopTx, advisory.Try())
	}},
	{"exec-inline", func(ctx context.Context, db *sql.DB) error {
		return byHandTx(ctx, db, func(tx *sql.Tx) error { return tryInline(ctx, tx) })
	}},
	{"exec-param", func(ctx context.Context, db *sql.DB) error {
		return byHandTx(ctx, db, func(tx *sql.Tx) error { return tryParam(ctx, tx) })
	}},
	// ours-wait is WithXactLock without Try on a free key, against the
	// blocking statement by hand that it sent before its waits ran in
	// slices.
	{"ours-wait", func(ctx context.Context, db *sql.DB) error {
		return advisory.WithXactLock(ctx, db, advisory.Int64Key(freshKeys.Add(1)), noopTx)
	}},
	{"exec-lock-inline", func(ctx context.Context, db *sql.DB) error {
		return byHandTx(ctx, db, func(tx *sql.Tx) error {
			return execOne(ctx, tx, "SELECT pg_advisory_xact_lock("+strconv.FormatInt(freshKeys.Add(1), 10)+")")
		})
	}},
	{"exec-lock-param", func(ctx context.Context, db *sql.DB) error {
		return byHandTx(ctx, db, func(tx *sql.Tx) error {
			return execOne(ctx, tx, "SELECT pg_advisory_xact_lock($1)", freshKeys.Add(1))
		})
	}},
	{"ours-two", func(ctx context.Context, db *sql.DB) error {
		return advisory.WithXactLock(ctx, db, advisory.Int64Key(freshKeys.Add(1)), func(ctx context.Context, tx *sql.Tx) error {
			_, err := advisory.TryXactLock(ctx, tx, advisory.Int64Key(freshKeys.Add(1)))
			return err
		}, advisory.Try())
	}},
	{"exec-inline-two", func(ctx context.Context, db *sql.DB) error {
		return byHandTx(ctx, db, func(tx *sql.Tx) error {
			if err := tryInline(ctx, tx); err != nil {
				return err
			}
			return tryInline(ctx, tx)
		})
	}},
	{"exec-param-two", func(ctx context.Context, db *sql.DB) error {
		return byHandTx(ctx, db, func(tx *sql.Tx) error {
			if err := tryParam(ctx, tx); err != nil {
				return err
			}
			return tryParam(ctx, tx)
		})
	}},
}

func noopTx(context.Context, *sql.Tx) error { return nil }

// byHandTx begins a transaction, runs f in it, and commits.
func byHandTx(ctx context.Context, db *sql.DB, f func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// tryInline and tryParam try a fresh transaction lock by hand, as the
// library's statement, with the key in the text and as $1.
func tryInline(ctx context.Context, tx *sql.Tx) error {
	return execOne(ctx, tx, "SELECT 1 WHERE pg_try_advisory_xact_lock("+strconv.FormatInt(freshKeys.Add(1), 10)+")")
}

func tryParam(ctx context.Context, tx *sql.Tx) error {
	return execOne(ctx, tx, "SELECT 1 WHERE pg_try_advisory_xact_lock($1)", freshKeys.Add(1))
}

// BenchmarkInterleavedWithXactLock runs each of scopedVariants once per op,
// each on a pool of one connection of its own, and reports each one's mean
// time per transaction as a metric ("ours-ns/call"), as
// [BenchmarkInterleavedTryLock] does for single calls.
func BenchmarkInterleavedWithXactLock(b *testing.B) {
	ctx := context.Background()
	for _, s := range pgtest.Servers(b) {
		b.Run(s.Name, func(b *testing.B) {
			for _, d := range benchDrivers {
				if d.only != "" {
					continue
				}
				b.Run(d.name, func(b *testing.B) {
					dbs := make([]*sql.DB, len(scopedVariants))
					totals := make([]time.Duration, len(scopedVariants))
					for i, v := range scopedVariants {
						dbs[i] = d.open(b, s.DSN)
						// Warm up: the connection exists and pgx has
						// prepared what it prepares.
						for range 3 {
							if err := v.op(ctx, dbs[i]); err != nil {
								b.Fatal(err)
							}
						}
					}
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						for i, v := range scopedVariants {
							start := time.Now()
							if err := v.op(ctx, dbs[i]); err != nil {
								b.Fatal(err)
							}
							totals[i] += time.Since(start)
						}
					}
					b.StopTimer()
					for i, v := range scopedVariants {
						b.ReportMetric(float64(totals[i].Nanoseconds())/float64(b.N), v.name+"-ns/call")
					}
				})
			}
		})
	}
}

// BenchmarkWithXactLock measures WithXactLock with Try end to end on a pool
// of one connection, one variant at a time, with its round trips and
// allocations: the one-try variants of scopedVariants (begin, try the
// lock, run an empty fn, commit; the baseline with "SELECT 1" in place of
// the lock; exec-inline and exec-param with the library's statement by
// hand, the key in the text and as $1).
func BenchmarkWithXactLock(b *testing.B) {
	for _, s := range pgtest.Servers(b) {
		b.Run(s.Name, func(b *testing.B) {
			proxy := s.Proxy(b)
			for _, d := range benchDrivers {
				if d.only != "" {
					continue
				}
				b.Run(d.name, func(b *testing.B) {
					for _, v := range scopedVariants {
						if strings.HasSuffix(v.name, "-two") {
							continue
						}
						b.Run(v.name, func(b *testing.B) {
							ctx := context.Background()
							rt, ok := roundTripCache.Load(b.Name())
							if !ok {
								// A *sql.DB pings a pgx connection it hands
								// out after a second idle; the warm-up
								// calls keep it busy.
								db := d.open(b, proxy.DSN())
								for range roundTripWarmup {
									if err := v.op(ctx, db); err != nil {
										b.Fatal(err)
									}
								}
								proxy.Reset()
								for range roundTripCalls {
									if err := v.op(ctx, db); err != nil {
										b.Fatal(err)
									}
								}
								rt = float64(proxy.Flights()) / roundTripCalls
								roundTripCache.Store(b.Name(), rt)
							}
							db := d.open(b, s.DSN)
							if err := v.op(ctx, db); err != nil {
								b.Fatal(err)
							}
							b.ReportAllocs()
							b.ResetTimer()
							for range b.N {
								if err := v.op(ctx, db); err != nil {
									b.Fatal(err)
								}
							}
							b.StopTimer()
							b.ReportMetric(rt.(float64), "roundtrips/op")
						})
					}
				})
			}
		})
	}
}

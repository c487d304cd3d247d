package advisory_test

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/benchorder"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// A scopedVariant is one transaction of BenchmarkInterleavedWithXactLock,
// on a pool of its own.
type scopedVariant struct {
	name  string
	hand  bool   // by hand, which the library's variants of its group are set against
	group string // "try", "wait", "two", or "" for the baseline
	op    func(ctx context.Context, db *sql.DB) error
}

// scopedVariants are the transactions BenchmarkInterleavedWithXactLock
// compares: WithXactLock with Try (ours), and the same transaction by
// hand in every form of the try ([handForm]), with one try of a fresh key;
// WithXactLock without Try (ours-wait) against the blocking statement by
// hand; and the same with two tries ("-two": the scope's fn tries a
// second key in the scope's transaction).
var scopedVariants = slices.Concat([]scopedVariant{
	{"baseline", false, "", func(ctx context.Context, db *sql.DB) error {
		return byHandTx(ctx, db, func(tx *sql.Tx) error { return execSelect1(ctx, tx) })
	}},
	{"ours", false, "try", func(ctx context.Context, db *sql.DB) error {
		return advisory.WithXactLock(ctx, db, advisory.Int64Key(freshKeys.Add(1)), noopTx, advisory.Try())
	}},
	// ours-wait is WithXactLock without Try on a free key, against the
	// blocking statement by hand.
	{"ours-wait", false, "wait", func(ctx context.Context, db *sql.DB) error {
		return advisory.WithXactLock(ctx, db, advisory.Int64Key(freshKeys.Add(1)), noopTx)
	}},
	{"exec-lock-inline", true, "wait", func(ctx context.Context, db *sql.DB) error {
		return byHandTx(ctx, db, func(tx *sql.Tx) error {
			return execOne(ctx, tx, "SELECT pg_catalog.pg_advisory_xact_lock("+strconv.FormatInt(freshKeys.Add(1), 10)+")")
		})
	}},
	{"exec-lock-param", true, "wait", func(ctx context.Context, db *sql.DB) error {
		return byHandTx(ctx, db, func(tx *sql.Tx) error {
			return execOne(ctx, tx, "SELECT pg_catalog.pg_advisory_xact_lock($1)", freshKeys.Add(1))
		})
	}},
	{"ours-two", false, "two", func(ctx context.Context, db *sql.DB) error {
		return advisory.WithXactLock(ctx, db, advisory.Int64Key(freshKeys.Add(1)), func(ctx context.Context, tx *sql.Tx) error {
			_, err := advisory.TryXactLock(ctx, tx, advisory.Int64Key(freshKeys.Add(1)))
			return err
		}, advisory.Try())
	}},
}, scopedByHand())

// scopedByHand returns the transactions by hand of scopedVariants: one
// try in every form, and two tries in the forms through ExecContext with
// "SELECT 1 WHERE" and through QueryRowContext with the plain SELECT.
func scopedByHand() []scopedVariant {
	var vs []scopedVariant
	for _, f := range handForms {
		vs = append(vs, scopedVariant{f.name, true, "try", func(ctx context.Context, db *sql.DB) error {
			return byHandTx(ctx, db, func(tx *sql.Tx) error { return tryHand(ctx, tx, f) })
		}})
	}
	for _, f := range handForms {
		if f.query == f.where {
			continue
		}
		vs = append(vs, scopedVariant{f.name + "-two", true, "two", func(ctx context.Context, db *sql.DB) error {
			return byHandTx(ctx, db, func(tx *sql.Tx) error {
				if err := tryHand(ctx, tx, f); err != nil {
					return err
				}
				return tryHand(ctx, tx, f)
			})
		}})
	}
	return vs
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

// tryHand tries a fresh transaction lock by hand, in form f.
func tryHand(ctx context.Context, tx *sql.Tx, f handForm) error {
	return f.call(ctx, tx, "pg_try_advisory_xact_lock", freshKeys.Add(1))
}

// BenchmarkInterleavedWithXactLock runs each of scopedVariants once per op,
// each on a pool of one connection of its own, in an order shuffled anew
// for every op, and reports each one's mean time per transaction as a
// metric ("ours-ns/call") and the library's over the fastest by hand of
// its group ("ours/best"), as [BenchmarkInterleavedTryLock] does for
// single calls.
func BenchmarkInterleavedWithXactLock(b *testing.B) {
	ctx := context.Background()
	for _, s := range pgtest.Servers(b) {
		b.Run(s.Name, func(b *testing.B) {
			for _, d := range benchDrivers {
				if d.paramsOnly {
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
					o := benchorder.New(b, len(scopedVariants))
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						for _, i := range o.Next() {
							start := time.Now()
							if err := scopedVariants[i].op(ctx, dbs[i]); err != nil {
								b.Fatal(err)
							}
							totals[i] += time.Since(start)
						}
					}
					b.StopTimer()
					n := len(scopedVariants)
					names, groups, hand, times := make([]string, n), make([]string, n), make([]bool, n), make([]float64, n)
					for i, v := range scopedVariants {
						names[i], groups[i], hand[i] = v.name, v.group, v.hand
						times[i] = float64(totals[i].Nanoseconds()) / float64(b.N)
						b.ReportMetric(times[i], v.name+"-ns/call")
					}
					reportBest(b, names, groups, hand, times)
				})
			}
		})
	}
}

// BenchmarkWithXactLock measures WithXactLock with Try end to end on a pool
// of one connection, one variant at a time, with its round trips and
// allocations: the one-try variants of scopedVariants (begin, try the
// lock, run an empty fn, commit; the baseline with "SELECT 1" in place of
// the lock; the forms of the try by hand).
func BenchmarkWithXactLock(b *testing.B) {
	for _, s := range pgtest.Servers(b) {
		b.Run(s.Name, func(b *testing.B) {
			proxy := s.Proxy(b)
			for _, d := range benchDrivers {
				if d.paramsOnly {
					continue
				}
				b.Run(d.name, func(b *testing.B) {
					for _, v := range scopedVariants {
						if v.group == "two" {
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

package advisory_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/benchorder"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// The benchmark of the forms of every lock call's statement, the key in
// the text or as a parameter, through ExecContext or QueryRowContext,
// which no single API owns (see entrypoints_integration_test.go for the
// tests of every entry point alike).

// formVariants are what BenchmarkInterleavedForm compares: the library's
// own lock statements, guarded as every lock call sends them, by hand in
// every form a driver could take them (see [stmtForm]), against the
// baseline and the library's call. Each op is a session TryLock and its
// Unlock, a transaction's TryXactLock inside an open transaction, or a
// whole WithXactLock with Try (begin, try, commit).
var formVariants = append([]formVariant{
	{"baseline", false,
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
	{"ours", false,
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
}, stmtFormVariants()...)

// A formVariant is one variant of BenchmarkInterleavedForm, in each of
// its three kinds of op.
type formVariant struct {
	name    string
	hand    bool // the library's statements by hand
	session benchOp
	xact    benchOp
	scoped  func(ctx context.Context, db *sql.DB, k int64) error
}

// A stmtForm is a way to send the library's statements: in a
// sqltext.Form (Inline, the key in the text; Params, the key as $1),
// through ExecContext, reading the answer from RowsAffected as the library
// does, or, with query, through QueryRowContext, with "SELECT 1 WHERE"
// turned into "SELECT", so that the answer is the row's boolean.
type stmtForm struct {
	name  string
	form  sqltext.Form
	query bool
}

// stmtForms are every [stmtForm].
var stmtForms = []stmtForm{
	{"inline", sqltext.Inline, false},
	{"inline-query", sqltext.Inline, true},
	{"params", sqltext.Params, false},
	{"params-query", sqltext.Params, true},
}

// send sends s in form f on q and requires the answer to be yes.
func (f stmtForm) send(ctx context.Context, q benchDB, s sqltext.Stmt) error {
	if !f.query {
		return execOne(ctx, q, s.Query, s.Args...)
	}
	rest, ok := strings.CutPrefix(s.Query, "SELECT 1 WHERE ")
	if !ok {
		return fmt.Errorf("%s: not a SELECT 1 WHERE", s.Query)
	}
	return queryBool(ctx, q, "SELECT "+rest, s.Args...)
}

// stmtFormVariants returns a variant for every form of stmtForms.
func stmtFormVariants() []formVariant {
	var vs []formVariant
	for _, f := range stmtForms {
		try := func(xact bool, k int64) sqltext.Stmt {
			return sqltext.TryLockStmt(f.form, sqltext.Guarded, xact, false, sqltext.Key{Bigint: k})
		}
		vs = append(vs, formVariant{f.name, true,
			func(ctx context.Context, h *benchHandle, k int64) error {
				if err := f.send(ctx, h.conn, try(false, k)); err != nil {
					return err
				}
				return f.send(ctx, h.conn, sqltext.UnlockStmt(f.form, false, sqltext.Key{Bigint: k}))
			},
			func(ctx context.Context, h *benchHandle, k int64) error { return f.send(ctx, h.tx, try(true, k)) },
			func(ctx context.Context, db *sql.DB, k int64) error {
				return byHandTx(ctx, db, func(tx *sql.Tx) error { return f.send(ctx, tx, try(true, k)) })
			}})
	}
	return vs
}

// BenchmarkInterleavedForm weighs the forms of the lock statements on
// both drivers (on lib/pq the Params forms cost a second round trip):
// every variant runs once per op, each on a connection of its own, with a
// fresh key, in an order shuffled anew for every op, and reports its mean
// time per call ("inline-ns/call"), and the library's over the fastest of
// the forms ("ours/best"), as [BenchmarkInterleavedTryLock] does.
// docs/benchmarks.md gives the figures and the choice they led to.
func BenchmarkInterleavedForm(b *testing.B) {
	ctx := context.Background()
	for _, s := range pgtest.Servers(b) {
		for _, d := range benchDrivers {
			if d.paramsOnly {
				continue
			}
			for _, kind := range []string{"Session", "Xact", "Scoped"} {
				b.Run(s.Name+"/"+d.name+"/"+kind, func(b *testing.B) {
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
						c := &call{db: d.open(b, s.DSN)}
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
					o := benchorder.New(b, len(calls))
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						for _, i := range o.Next() {
							c := calls[i]
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
					n := len(calls)
					names, groups, hand, times := make([]string, n), make([]string, n), make([]bool, n), make([]float64, n)
					for i, c := range calls {
						if c.h != nil {
							c.h.finish(b)
						}
						v := formVariants[i]
						names[i], hand[i], times[i] = v.name, v.hand, float64(c.total.Nanoseconds())/float64(b.N)
						if v.name != "baseline" {
							groups[i] = "form"
						}
						b.ReportMetric(times[i], v.name+"-ns/call")
					}
					reportBest(b, names, groups, hand, times)
				})
			}
		}
	}
}

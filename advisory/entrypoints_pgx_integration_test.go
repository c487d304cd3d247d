package advisory_test

import (
	"context"
	"database/sql"
	"math"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// What every entry point sends on pgx: the same lock in each of pgx's
// query modes, and one prepared statement per kind of call, whatever its
// key (the PgxExecModes and PreparedStatements subtests of
// TestEntryPointsIntegration; see entrypoints_integration_test.go).

// testEntryPointsPgxExecModes runs the calls that send their key as a
// parameter on pgx, in each of pgx's query modes, with the keys at the
// ends of both key spaces, and checks through another session that the
// lock taken is the key's own: a statement pgx prepares, describes, runs
// unnamed or writes out on the client must all take the same lock. The
// calls: TryLock, Lock and Unlock, their shared forms, the four
// transaction locks in a transaction the caller began, WithXactLock with
// and without Try and TryXactLock and XactLock in its transaction, and a
// lease's Acquire, whose confirmation reads pg_locks by the key.
func testEntryPointsPgxExecModes(t *testing.T) {
	keys := []advisory.Key{
		advisory.Int64Key(math.MinInt64), advisory.Int64Key(math.MaxInt64), advisory.Int64Key(-1),
		advisory.PairKey(math.MinInt32, math.MaxInt32), advisory.PairKey(-1, 0),
	}
	for _, s := range pgtest.Servers(t) {
		t.Run(s.Name, func(t *testing.T) {
			other := pgtest.Conn(t, s.Open(t, pgtest.DriverPQ))
			for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
				t.Run(mode, func(t *testing.T) {
					u, err := url.Parse(s.DSN)
					if err != nil {
						t.Fatal(err)
					}
					q := u.Query()
					q.Set("default_query_exec_mode", mode)
					u.RawQuery = q.Encode()
					db, err := sql.Open("pgx", u.String())
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { db.Close() })
					conn := pgtest.Conn(t, db)
					ctx := context.Background()
					for i, k := range keys {
						checkPgxSession(ctx, t, conn, other, k)
						checkPgxShared(ctx, t, conn, other, k)
						checkPgxCallerTx(ctx, t, conn, other, k)
						// The scope's transaction also takes the next key,
						// in the parameter form, as every transaction on pgx does.
						k2 := keys[(i+1)%len(keys)]
						for _, opts := range [][]advisory.XactOption{{advisory.Try()}, nil} {
							err := advisory.WithXactLock(ctx, db, k, func(ctx context.Context, tx *sql.Tx) error {
								if ok, err := advisory.TryXactLock(ctx, tx, k2); err != nil || !ok {
									t.Errorf("%v: TryXactLock in the scope = %v, %v; want true", k2, ok, err)
								}
								if err := advisory.XactLock(ctx, tx, k2); err != nil {
									t.Errorf("%v: XactLock in the scope: %v", k2, err)
								}
								for _, key := range []advisory.Key{k, k2} {
									if held := otherTriesXact(ctx, t, other, key); held {
										t.Errorf("%v: another session took it during WithXactLock(%v)", key, k)
									}
								}
								return nil
							}, opts...)
							if err != nil {
								t.Errorf("%v: WithXactLock: %v", k, err)
							}
						}
						l, err := advisory.Acquire(ctx, db, k, advisory.Heartbeat(time.Hour))
						if err != nil {
							t.Fatalf("%v: Acquire: %v", k, err)
						}
						if ok, err := advisory.TryLock(ctx, other, k); err != nil || ok {
							t.Errorf("%v: another session's TryLock during a lease = %v, %v; want false", k, ok, err)
						}
						if err := l.Release(ctx); err != nil {
							t.Errorf("%v: Release: %v", k, err)
						}
					}
				})
			}
		})
	}
}

// otherTriesXact reports whether other could take key as a transaction
// lock; its transaction ends before it returns.
func otherTriesXact(ctx context.Context, t *testing.T, other *sql.Conn, key advisory.Key) bool {
	t.Helper()
	otx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer otx.Rollback()
	ok, err := advisory.TryXactLock(ctx, otx, key)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// checkPgxCallerTx takes k four times in a transaction it begins on conn,
// with TryXactLock, XactLock and their shared forms, checks that other
// cannot take it, and commits.
func checkPgxCallerTx(ctx context.Context, t *testing.T, conn, other *sql.Conn, k advisory.Key) {
	t.Helper()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if ok, err := advisory.TryXactLock(ctx, tx, k); err != nil || !ok {
		t.Fatalf("%v: TryXactLock in a caller's tx = %v, %v", k, ok, err)
	}
	if err := advisory.XactLock(ctx, tx, k); err != nil {
		t.Fatalf("%v: XactLock in a caller's tx: %v", k, err)
	}
	if ok, err := advisory.TryXactLockShared(ctx, tx, k); err != nil || !ok {
		t.Fatalf("%v: TryXactLockShared in a caller's tx = %v, %v", k, ok, err)
	}
	if err := advisory.XactLockShared(ctx, tx, k); err != nil {
		t.Fatalf("%v: XactLockShared in a caller's tx: %v", k, err)
	}
	if otherTriesXact(ctx, t, other, k) {
		t.Errorf("%v: another session took it during a caller's tx", k)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if !otherTriesXact(ctx, t, other, k) {
		t.Errorf("%v: another session could not take it after the caller's tx", k)
	}
}

// checkPgxShared takes k shared on conn, with TryLockShared and LockShared
// stacked, checks that other can share it but not take it exclusively,
// and releases them all.
func checkPgxShared(ctx context.Context, t *testing.T, conn, other *sql.Conn, k advisory.Key) {
	t.Helper()
	if ok, err := advisory.TryLockShared(ctx, conn, k); err != nil || !ok {
		t.Fatalf("%v: TryLockShared = %v, %v", k, ok, err)
	}
	if err := advisory.LockShared(ctx, conn, k); err != nil {
		t.Fatalf("%v: LockShared: %v", k, err)
	}
	if ok, err := advisory.TryLock(ctx, other, k); err != nil || ok {
		t.Errorf("%v: another session's TryLock on a shared lock = %v, %v; want false", k, ok, err)
	}
	if ok, err := advisory.TryLockShared(ctx, other, k); err != nil || !ok {
		t.Errorf("%v: another session's TryLockShared = %v, %v; want true", k, ok, err)
	} else if err := advisory.UnlockShared(ctx, other, k); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := advisory.UnlockShared(ctx, conn, k); err != nil {
			t.Fatalf("%v: UnlockShared: %v", k, err)
		}
	}
}

// checkPgxSession takes k on conn with TryLock, then with Lock stacked on
// it, checks that other cannot take it, and releases both.
func checkPgxSession(ctx context.Context, t *testing.T, conn, other *sql.Conn, k advisory.Key) {
	t.Helper()
	if ok, err := advisory.TryLock(ctx, conn, k); err != nil || !ok {
		t.Fatalf("%v: TryLock = %v, %v", k, ok, err)
	}
	if err := advisory.Lock(ctx, conn, k); err != nil {
		t.Fatalf("%v: Lock: %v", k, err)
	}
	if ok, err := advisory.TryLock(ctx, other, k); err != nil || ok {
		t.Errorf("%v: another session's TryLock = %v, %v; want false", k, ok, err)
	}
	for range 2 {
		if err := advisory.Unlock(ctx, conn, k); err != nil {
			t.Fatalf("%v: Unlock: %v", k, err)
		}
	}
	if ok, err := advisory.TryLock(ctx, other, k); err != nil || !ok {
		t.Errorf("%v: another session's TryLock after the unlocks = %v, %v; want true", k, ok, err)
	}
	if err := advisory.Unlock(ctx, other, k); err != nil {
		t.Fatal(err)
	}
}

// testEntryPointsPreparedStatements proves that a key never makes a
// statement of its own: after 300 rounds of session and transaction locks
// with fresh keys on one connection, in transactions the caller began and
// in WithXactLock's, pgx holds one prepared statement per kind of call,
// with the key as a parameter, and lib/pq none. A transaction the caller
// began sends its key as a parameter too: the library finds its driver
// under the *sql.Tx.
func testEntryPointsPreparedStatements(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		conn := pgtest.Conn(t, tg.DB)
		for range 300 {
			for _, k := range []advisory.Key{keys.next(), keys.nextPair()} {
				if ok, err := advisory.TryLock(ctx, conn, k); err != nil || !ok {
					t.Fatalf("TryLock(%v) = %v, %v", k, ok, err)
				}
				if err := advisory.Unlock(ctx, conn, k); err != nil {
					t.Fatal(err)
				}
				// A free key's wait is its try, the statement TryLock
				// sends.
				if err := advisory.Lock(ctx, conn, k); err != nil {
					t.Fatalf("Lock(%v) = %v", k, err)
				}
				if err := advisory.Unlock(ctx, conn, k); err != nil {
					t.Fatal(err)
				}
			}
			// A transaction the caller began sends its key as a
			// parameter on pgx, the form of the driver under it.
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := advisory.TryXactLock(ctx, tx, keys.next()); err != nil || !ok {
				t.Fatalf("TryXactLock = %v, %v", ok, err)
			}
			if err := advisory.XactLockShared(ctx, tx, keys.nextPair()); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			// A transaction that WithXactLock began sends its key as a
			// parameter on pgx, its *sql.DB's form, and so does a lock
			// taken in it under the context the scope gave fn.
			err = advisory.WithXactLock(ctx, tg.DB, keys.next(), func(ctx context.Context, tx *sql.Tx) error {
				return advisory.XactLock(ctx, tx, keys.next())
			}, advisory.Try())
			if err != nil {
				t.Fatal(err)
			}
		}

		got := preparedStatements(t, conn)
		var want []string
		if tg.Driver != pgtest.DriverPQ {
			bigint, pair := sqltext.Key{Bigint: 1}, sqltext.Key{Pair: true, A: 1, B: 2}
			want = []string{
				sqltext.TryLockStmt(sqltext.Params, sqltext.Guarded, false, false, bigint).Query,
				sqltext.TryLockStmt(sqltext.Params, sqltext.Guarded, false, false, pair).Query,
				sqltext.UnlockStmt(sqltext.Params, false, bigint).Query,
				sqltext.UnlockStmt(sqltext.Params, false, pair).Query,
				// The caller's transactions.
				sqltext.TryLockStmt(sqltext.Params, sqltext.Guarded, true, false, bigint).Query,
				sqltext.TryLockStmt(sqltext.Params, sqltext.Guarded, true, true, pair).Query,
				// The engine's probe, once per connection, at its
				// first lock call.
				sqltext.EngineProbe,
			}
			slices.Sort(want) // as preparedStatements sorts them
		}
		if !slices.Equal(got, want) {
			t.Errorf("prepared statements on the connection:\n got %q\nwant %q", got, want)
		}
		// conn is held, so WithXactLock took the pool's other connection.
		if tg.Driver != pgtest.DriverPQ {
			xconn := pgtest.Conn(t, tg.DB)
			got := preparedStatements(t, xconn)
			// A free key's wait is its try; the connection was probed
			// at its first lock call.
			want := []string{sqltext.TryLockStmt(sqltext.Params, sqltext.Guarded, true, false, sqltext.Key{Bigint: 1}).Query, sqltext.EngineProbe}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("prepared statements on the transactions' connection:\n got %q\nwant %q", got, want)
			}
		}
	})
}

// preparedStatements returns the texts of the statements prepared on
// conn's session, sorted byte by byte, as slices.Sort sorts, but for the
// one that asks.
func preparedStatements(t *testing.T, conn *sql.Conn) []string {
	t.Helper()
	rows, err := conn.QueryContext(context.Background(), `SELECT statement FROM pg_prepared_statements ORDER BY statement COLLATE "C"`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(s, "pg_prepared_statements") {
			out = append(out, s)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

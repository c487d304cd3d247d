package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of what the two scopes do alike, WithXactLock
// (xactscope.go) and WithSessionLock (sessionscope.go), and helpers their
// tests share. What only one of them does is in
// xactscope_integration_test.go and sessionscope_integration_test.go.

// TestScopedIntegration runs the integration tests of both scopes alike,
// one subtest a theme, each on every server and driver.
func TestScopedIntegration(t *testing.T) {
	t.Run("Basics", testScopedBasics)
	t.Run("ContextEndsInFn", testScopedContextEndsInFn)
}

// errScopedFn is what fn returns to make a scoped helper roll back or release.
var errScopedFn = errors.New("fn failed on purpose")

// pgTable creates a table with one int column for t, dropped at cleanup,
// and returns its name.
func pgTable(t *testing.T, db *sql.DB) string {
	t.Helper()
	name := pgtest.UniqueName("advisory_it_")
	pgtest.Exec(t, db, "CREATE TABLE "+name+" (v int)")
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE " + name) })
	return name
}

// pgCount counts the rows of table where v = v.
func pgCount(t *testing.T, db *sql.DB, table string, v int) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM "+table+" WHERE v = $1", v).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// pgModeName names a subtest for a lock mode.
func pgModeName(shared bool) string {
	if shared {
		return "Shared"
	}
	return "Exclusive"
}

// pgCtxErrName names a subtest for the context error it expects.
func pgCtxErrName(err error) string {
	if err == context.DeadlineExceeded {
		return "DeadlineExceeded"
	}
	return "Canceled"
}

// pgRequirePooledClean fails t unless the one session of db (opened with
// pgOpenOne) is pid, idle, outside a transaction and without advisory
// locks: the state a helper must leave a connection in when it returns it
// to the pool.
func pgRequirePooledClean(t *testing.T, obs, db *sql.DB, pid int) {
	t.Helper()
	if state := pgSessionState(t, obs, pid); state != "idle" {
		t.Errorf("pooled session %d is %q; want idle", pid, state)
	}
	pgRequireNoLocks(t, obs, pid)
	if got := pgtest.PID(t, db); got != pid {
		t.Fatalf("the pool's session changed from %d to %d: the helper closed it", pid, got)
	}
}

// pgScope is one kind of scoped helper, WithXactLock or WithSessionLock,
// seen through what both hand fn: a context and the session it runs on.
type pgScope struct {
	name   string // the subtest: "Xact" or "Session"
	helper string // the function, for messages
	// with runs fn under the helper's lock; q is fn's *sql.Tx or *sql.Conn.
	with func(ctx context.Context, db *sql.DB, k advisory.Key, fn func(ctx context.Context, q pgtest.Querier) error, opts ...advisory.LockOption) error
	// afterAcquireError checks the one session pid of db (from
	// pgOpenOne) after the server ended the wait with lock_timeout.
	afterAcquireError func(t *testing.T, obs, db *sql.DB, pid int)
	// afterEndedWait checks the session pid after ctx ended while the
	// helper waited for the lock, and the waiter was seen waiting or not.
	afterEndedWait func(t *testing.T, obs *sql.DB, pid int, waited bool)
}

// pgScopes are the scoped helpers, for what they do alike.
var pgScopes = []pgScope{
	{
		name:   "Xact",
		helper: "WithXactLock",
		with: func(ctx context.Context, db *sql.DB, k advisory.Key, fn func(context.Context, pgtest.Querier) error, opts ...advisory.LockOption) error {
			return advisory.WithXactLock(ctx, db, k, func(ctx context.Context, tx *sql.Tx) error { return fn(ctx, tx) }, as[advisory.XactOption](opts)...)
		},
		afterAcquireError: func(t *testing.T, obs, db *sql.DB, pid int) {
			t.Helper()
			// The transaction rolled back: the session is clean and
			// goes back to the pool.
			pgRequirePooledClean(t, obs, db, pid)
		},
		afterEndedWait: func(t *testing.T, obs *sql.DB, pid int, waited bool) {
			t.Helper()
			// Whatever became of the waiter's session, it holds nothing.
			pgtest.Await(t, fmt.Sprintf("the waiter %d (seen waiting: %v) to hold no advisory lock", pid, waited), func() (bool, error) {
				locks, err := pgQueryLocksOfPID(context.Background(), obs, pid)
				return len(locks) == 0, err
			})
		},
	},
	{
		name:   "Session",
		helper: "WithSessionLock",
		with: func(ctx context.Context, db *sql.DB, k advisory.Key, fn func(context.Context, pgtest.Querier) error, opts ...advisory.LockOption) error {
			return advisory.WithSessionLock(ctx, db, k, func(ctx context.Context, conn *sql.Conn) error { return fn(ctx, conn) }, as[advisory.SessionOption](opts)...)
		},
		afterAcquireError: func(t *testing.T, obs, db *sql.DB, pid int) {
			t.Helper()
			// A wait that ran out took its key as a transaction lock
			// first, which ended with the statement: the session holds
			// nothing and goes back to the pool.
			pgRequirePooledClean(t, obs, db, pid)
		},
		afterEndedWait: func(t *testing.T, obs *sql.DB, pid int, waited bool) {
			t.Helper()
			if waited {
				// An interrupted wait may have been granted: the
				// session is closed.
				pgWaitGone(t, obs, pid)
			}
		},
	},
}

// testScopedBasics checks what WithXactLock and WithSessionLock do
// alike: shared mode, Try, Timeout, and a context that ends while they wait.
// What only one of them does is in TestWithXactLockIntegration and
// TestWithSessionLockIntegration.
func testScopedBasics(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		for _, sc := range pgScopes {
			t.Run(sc.name, func(t *testing.T) {
				t.Parallel()
				// noFn is fn where the helper must not run it.
				noFn := func(context.Context, pgtest.Querier) error {
					t.Error("fn ran without the lock")
					return nil
				}

				t.Run("Shared", func(t *testing.T) {
					k := keys.nextPair()
					err := sc.with(ctx, tg.DB, k, func(ctx context.Context, q pgtest.Querier) error {
						pgRequireHolds(t, tg.DB, pgtest.PID(t, q), k, true)
						// Another shared holder joins; an exclusive one cannot.
						inner := sc.with(ctx, tg.DB, k, func(context.Context, pgtest.Querier) error { return nil }, advisory.Shared(), advisory.Try())
						if inner != nil {
							t.Errorf("shared %s beside a shared one = %v; want nil", sc.helper, inner)
						}
						inner = sc.with(ctx, tg.DB, k, noFn, advisory.Try())
						if !errors.Is(inner, advisory.ErrNotAcquired) {
							t.Errorf("exclusive %s beside a shared one = %v; want ErrNotAcquired", sc.helper, inner)
						}
						return nil
					}, advisory.Shared())
					if err != nil {
						t.Fatal(err)
					}
					pgRequireFree(t, tg.DB, k)
				})

				t.Run("Try", func(t *testing.T) {
					for _, shared := range []bool{false, true} {
						t.Run(pgModeName(shared), func(t *testing.T) {
							k := keys.next()
							holder := pgtest.Conn(t, tg.DB)
							if err := advisory.Lock(ctx, holder, k); err != nil {
								t.Fatal(err)
							}
							db := pgOpenOne(t, tg)
							pid := pgtest.PID(t, db)
							opts := []advisory.LockOption{advisory.Try()}
							if shared {
								opts = append(opts, advisory.Shared())
							}
							err := sc.with(ctx, db, k, noFn, opts...)
							if !errors.Is(err, advisory.ErrNotAcquired) {
								t.Fatalf("%s(Try) on a held key = %v; want ErrNotAcquired", sc.helper, err)
							}
							// Not acquired is a clean answer: the session
							// goes back to the pool, whatever the scope.
							pgRequirePooledClean(t, tg.DB, db, pid)
							if err := advisory.Unlock(ctx, holder, k); err != nil {
								t.Fatal(err)
							}
						})
					}
				})

				t.Run("Timeout", func(t *testing.T) {
					db := pgOpenOne(t, tg)
					def := pgShow(t, db, "lock_timeout")

					t.Run("Expires", func(t *testing.T) {
						k := keys.next()
						holder := pgtest.Conn(t, tg.DB)
						if err := advisory.Lock(ctx, holder, k); err != nil {
							t.Fatal(err)
						}
						pid := pgtest.PID(t, db)
						err := sc.with(ctx, db, k, noFn, advisory.Wait(50*time.Millisecond))
						if !errors.Is(err, advisory.ErrLockTimeout) {
							t.Fatalf("%s(Timeout) on a held key = %v; want ErrLockTimeout", sc.helper, err)
						}
						// The server's 55P03 is reachable, unless the try
						// and the settings took the whole bound, on a
						// loaded machine, and no slice was sent.
						if code := pgSQLState(err); code != "55P03" && !strings.Contains(err.Error(), "Wait ran out") {
							t.Errorf("driver error SQLSTATE %q in %v; want 55P03 reachable with errors.As", code, err)
						}
						sc.afterAcquireError(t, tg.DB, db, pid)
						// The next user of the pool sees no lock_timeout.
						if v := pgShow(t, db, "lock_timeout"); v != def {
							t.Errorf("lock_timeout for the pool's next user = %q; want the default %q", v, def)
						}
						if err := advisory.Unlock(ctx, holder, k); err != nil {
							t.Fatal(err)
						}
					})

					t.Run("Acquired", func(t *testing.T) {
						k := keys.next()
						pid := pgtest.PID(t, db)
						ran := false
						err := sc.with(ctx, db, k, func(ctx context.Context, q pgtest.Querier) error {
							ran = true
							if got := pgtest.PID(t, q); got != pid {
								t.Errorf("fn runs on session %d; want the pool's %d", got, pid)
							}
							pgRequireHolds(t, tg.DB, pid, k, false)
							// The bound covered the lock statement only.
							if v := pgShow(t, q, "lock_timeout"); v != def {
								t.Errorf("lock_timeout inside fn = %q; want the default %q", v, def)
							}
							return nil
						}, advisory.Wait(time.Second))
						if err != nil || !ran {
							t.Fatalf("%s(Timeout) on a free key = %v (fn ran: %v); want nil", sc.helper, err, ran)
						}
						pgRequirePooledClean(t, tg.DB, db, pid)
						if v := pgShow(t, db, "lock_timeout"); v != def {
							t.Errorf("lock_timeout on the pooled session = %q; want the default %q", v, def)
						}
						pgRequireFree(t, tg.DB, k)
					})
				})

				t.Run("ContextEndsWhileWaiting", func(t *testing.T) {
					for _, want := range []error{context.Canceled, context.DeadlineExceeded} {
						t.Run(pgCtxErrName(want), func(t *testing.T) {
							k := keys.next()
							holder := pgtest.Conn(t, tg.DB)
							if err := advisory.Lock(ctx, holder, k); err != nil {
								t.Fatal(err)
							}
							// One warm session, whose pid is known before the wait.
							db := pgOpenOne(t, tg)
							pid := pgtest.PID(t, db)
							waited, err := pgEndWhileWaiting(t, tg.DB, pid, k, want, func(wctx context.Context) error {
								return sc.with(wctx, db, k, noFn)
							})
							if !errors.Is(err, want) {
								t.Fatalf("%s with ctx ending while it waits = %v; want an error wrapping %v", sc.helper, err, want)
							}
							if err := advisory.Unlock(ctx, holder, k); err != nil {
								t.Fatal(err)
							}
							sc.afterEndedWait(t, tg.DB, pid, waited)
							pgtest.AwaitFree(t, tg.DB, k)
						})
					}
				})
			})
		}
	})
}

// testScopedContextEndsInFn: when ctx ends while fn runs and fn
// returns nil, WithXactLock reports ctx's error (the transaction was rolled
// back, undoing fn's work), and WithSessionLock reports fn's nil (the lock
// was held until fn returned, and nothing was undone). Each doc says so.
func testScopedContextEndsInFn(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		keys := newPGKeys()
		t.Run("Xact", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			err := advisory.WithXactLock(ctx, tg.DB, keys.next(), func(context.Context, *sql.Tx) error {
				cancel()
				return nil
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v; want context.Canceled", err)
			}
		})
		t.Run("Session", func(t *testing.T) {
			key := keys.next()
			ctx, cancel := context.WithCancel(context.Background())
			err := advisory.WithSessionLock(ctx, tg.DB, key, func(context.Context, *sql.Conn) error {
				cancel()
				return nil
			})
			if err != nil {
				t.Fatalf("got %v; want nil: the lock was held until fn returned", err)
			}
			pgtest.AwaitFree(t, tg.DB, key)
		})
	})
}

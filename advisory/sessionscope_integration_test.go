package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of the session scopes, WithSessionLock and
// WithSessionLockConn (sessionscope.go): what they do, and what they
// report when their session is lost or left in a transaction, or when fn
// panics. The pool-hygiene run is in
// sessionscope_hygiene_integration_test.go; what both scopes do alike is
// in scoped_integration_test.go.

// TestWithSessionLockIntegration runs the integration tests of the
// session scopes, one subtest a theme, each on every server and driver.
func TestWithSessionLockIntegration(t *testing.T) {
	t.Run("Basics", testWithSessionLockBasics)
	t.Run("LockLost", testWithSessionLockLockLost)
	t.Run("TxLeftOpen", testWithSessionLockTxLeftOpen)
	t.Run("TxLeftOpenConcurrent", testWithSessionLockTxLeftOpenConcurrent)
	t.Run("PanicReleases", testWithSessionLockPanicReleases)
	t.Run("HeartbeatCtxEnds", testWithSessionLockHeartbeatCtxEnds)
	t.Run("GhostPoolHygiene", testWithSessionLockGhostPoolHygiene)
	t.Run("Marks", testWithSessionLockMarks)
}

func testWithSessionLockBasics(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()

		for _, tc := range []struct {
			name   string
			shared bool
			fnErr  error
		}{
			{"ReleasesAfterFn", false, nil},
			{"ReleasesAfterFnShared", true, nil},
			{"ReleasesOnError", false, errScopedFn},
		} {
			t.Run(tc.name, func(t *testing.T) {
				k := keys.next()
				db := pgOpenOne(t, tg)
				var pid int
				var opts []advisory.LockOption
				if tc.shared {
					opts = append(opts, advisory.Shared())
				}
				err := advisory.WithSessionLock(ctx, db, k, func(ctx context.Context, conn *sql.Conn) error {
					pid = pgtest.PID(t, conn)
					pgRequireHolds(t, tg.DB, pid, k, tc.shared)
					return tc.fnErr
				}, as[advisory.SessionOption](opts)...)
				if !errors.Is(err, tc.fnErr) || (tc.fnErr == nil && err != nil) {
					t.Fatalf("WithSessionLock = %v; want %v", err, tc.fnErr)
				}
				pgRequireFree(t, tg.DB, k)
				// Released cleanly, so the session went back to the pool.
				pgRequirePooledClean(t, tg.DB, db, pid)
			})
		}

		t.Run("PanicClosesSession", func(t *testing.T) {
			k := keys.next()
			var pid int
			p := func() (p any) {
				defer func() { p = recover() }()
				_ = advisory.WithSessionLock(ctx, tg.DB, k, func(ctx context.Context, conn *sql.Conn) error {
					pid = pgtest.PID(t, conn)
					panic(errScopedFn)
				})
				return nil
			}()
			if p != errScopedFn {
				t.Fatalf("recovered %v; want fn's panic to continue", p)
			}
			pgWaitGone(t, tg.DB, pid)
			pgRequireFree(t, tg.DB, k)
		})

		t.Run("LockLost", func(t *testing.T) {
			// fn releases the lock itself: the helper reports that fn may
			// have run without it, and closes the session.
			k := keys.next()
			var pid int
			err := advisory.WithSessionLock(ctx, tg.DB, k, func(ctx context.Context, conn *sql.Conn) error {
				pid = pgtest.PID(t, conn)
				return advisory.Unlock(ctx, conn, k)
			})
			if !errors.Is(err, advisory.ErrLockLost) {
				t.Fatalf("WithSessionLock whose fn unlocked = %v; want ErrLockLost", err)
			}
			pgWaitGone(t, tg.DB, pid)
			pgRequireFree(t, tg.DB, k)
		})
	})
}

// sessionScopeKinds runs a session scope through WithSessionLock, which
// owns its connection, and through WithSessionLockConn on a connection of
// the test's.
var sessionScopeKinds = []struct {
	name string
	run  func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, fn func(context.Context, *sql.Conn) error) error
}{
	{"Owned", func(ctx context.Context, _ *testing.T, db *sql.DB, key advisory.Key, fn func(context.Context, *sql.Conn) error) error {
		return advisory.WithSessionLock(ctx, db, key, fn)
	}},
	{"Conn", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, fn func(context.Context, *sql.Conn) error) error {
		conn := pgtest.Conn(t, db)
		return advisory.WithSessionLockConn(ctx, conn, key, fn)
	}},
}

// pgTakeOver terminates backend pid from obs and waits until other holds
// key, so that the scope whose session pid was has lost its lock for sure.
func pgTakeOver(t *testing.T, obs *sql.DB, other *sql.Conn, pid int, key advisory.Key) {
	t.Helper()
	pgtest.Exec(t, obs, "SELECT pg_terminate_backend($1)", pid)
	pgtest.Await(t, fmt.Sprintf("another session to take %s after backend %d was terminated", key, pid), func() (bool, error) {
		return advisory.TryLock(context.Background(), other, key)
	})
}

// testWithSessionLockLockLost: a scope whose backend was
// terminated while fn ran, and whose key another session then took, never
// reports success, whether ctx ended before fn returned or not.
func testWithSessionLockLockLost(t *testing.T) {
	pgtest.EachDriver(t, pgAllDrivers, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		keys := newPGKeys()
		for _, kind := range sessionScopeKinds {
			for _, deadline := range []bool{true, false} {
				name := kind.name + "/NoDeadline"
				if deadline {
					name = kind.name + "/DeadlinePassesInFn"
				}
				t.Run(name, func(t *testing.T) {
					key := keys.next()
					ctx := context.Background()
					if deadline {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, 800*time.Millisecond)
						defer cancel()
					}
					other := pgtest.Conn(t, tg.DB)
					defer func() { _ = advisory.UnlockAll(context.Background(), other) }()
					err := kind.run(ctx, t, tg.DB, key, func(fnCtx context.Context, conn *sql.Conn) error {
						pgTakeOver(t, tg.DB, other, pgtest.PID(t, conn), key)
						if deadline {
							<-fnCtx.Done() // sleep past the deadline
						}
						return nil
					})
					if !errors.Is(err, advisory.ErrLockLost) {
						t.Fatalf("got %v; want an error matching ErrLockLost", err)
					}
				})
			}
		}
	})
}

// testWithSessionLockTxLeftOpen: an fn that returns with a
// transaction still open on conn, failed or not, begun on fn's context or
// on another, gets a prompt error that names the mistake, and the lock is
// released at once.
func testWithSessionLockTxLeftOpen(t *testing.T) {
	pgtest.EachDriver(t, pgAllDrivers, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		keys := newPGKeys()
		errDiv := errors.New("fn's statement failed")
		for _, kind := range sessionScopeKinds {
			for _, tc := range []struct {
				name      string
				failed    bool // a statement failed in the transaction
				ownCtx    bool // the transaction is begun on context.Background()
				wantFnErr bool
			}{
				{"FailedOnFnCtx", true, false, true},
				{"FailedOnOtherCtx", true, true, true},
				{"OpenOnFnCtx", false, false, false},
				{"OpenOnOtherCtx", false, true, false},
			} {
				t.Run(kind.name+"/"+tc.name, func(t *testing.T) {
					key := keys.next()
					db := pgOpenOne(t, tg)
					var tx *sql.Tx
					var conn *sql.Conn // the test's, for WithSessionLockConn
					run := kind.run
					if kind.name == "Conn" {
						conn = pgtest.Conn(t, db)
						run = func(ctx context.Context, _ *testing.T, _ *sql.DB, key advisory.Key, fn func(context.Context, *sql.Conn) error) error {
							return advisory.WithSessionLockConn(ctx, conn, key, fn)
						}
					}
					done := make(chan error, 1)
					go func() {
						done <- run(context.Background(), t, db, key, func(ctx context.Context, conn *sql.Conn) error {
							txCtx := ctx
							if tc.ownCtx {
								txCtx = context.Background()
							}
							var err error
							if tx, err = conn.BeginTx(txCtx, nil); err != nil {
								return err
							}
							if tc.failed {
								if _, err := tx.ExecContext(txCtx, "SELECT 1/0"); err == nil {
									t.Error("SELECT 1/0 succeeded")
								}
								return errDiv
							}
							return nil
						})
					}()
					var err error
					select {
					case err = <-done:
					case <-time.After(30 * time.Second):
						t.Fatal("the scope did not return within 30s: it hangs on the transaction fn left open")
					}
					if err == nil || !strings.Contains(err.Error(), "transaction still open") {
						t.Fatalf("got %v; want an error saying fn left a transaction open", err)
					}
					if tc.wantFnErr && !errors.Is(err, errDiv) {
						t.Errorf("got %v; want it to match fn's error too", err)
					}
					pgtest.AwaitFree(t, tg.DB, key)
					if tx != nil {
						_ = tx.Rollback()
					}
					if conn != nil {
						// The caller's conn is the caller's to close,
						// as always; its session is gone.
						_ = conn.Close()
					}
					// Once the transaction has ended and the conn is
					// closed, the pool's one slot serves again.
					ctx, cancel := context.WithTimeout(context.Background(), pgtest.PollTimeout)
					defer cancel()
					if err := db.PingContext(ctx); err != nil {
						t.Fatalf("the pool did not get its connection back: %v", err)
					}
				})
			}
		}
	})
}

// testWithSessionLockPanicReleases: when fn panics, the lock is
// released before the panic reaches the caller, so another session can
// take the key at once, without polling.
func testWithSessionLockPanicReleases(t *testing.T) {
	pgtest.EachDriver(t, pgAllDrivers, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		keys := newPGKeys()
		other := pgtest.Conn(t, tg.DB)
		for _, kind := range sessionScopeKinds {
			t.Run(kind.name, func(t *testing.T) {
				for i := range 20 {
					key := keys.next()
					func() {
						defer func() {
							if r := recover(); r != "boom" {
								t.Fatalf("recovered %v; want the panic", r)
							}
						}()
						_ = kind.run(context.Background(), t, tg.DB, key, func(ctx context.Context, conn *sql.Conn) error {
							pgtest.Exec(t, conn, "SELECT 1")
							panic("boom")
						})
					}()
					ok, err := advisory.TryLock(context.Background(), other, key)
					if err != nil || !ok {
						t.Fatalf("run %d: TryLock right after the panic = %v, %v; want the key free", i, ok, err)
					}
					if err := advisory.Unlock(context.Background(), other, key); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	})
}

// testWithSessionLockTxLeftOpenConcurrent: many scopes at once
// whose fn leaves a transaction open on fn's context. Each ends its
// session while the transaction is open, then database/sql rolls the
// transaction back and closes the connection; the two must not race (a
// Raw call racing a Conn's close makes database/sql panic). Every scope
// reports the mistake, and no lock stays held.
func testWithSessionLockTxLeftOpenConcurrent(t *testing.T) {
	pgtest.EachDriver(t, pgAllDrivers, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		keys := newPGKeys()
		db := tg.Server.Open(t, tg.Driver)
		db.SetMaxOpenConns(8)
		var wg sync.WaitGroup
		for range 4 {
			ks := []advisory.Key{keys.next(), keys.next()}
			wg.Go(func() {
				for i := range 25 {
					err := advisory.WithSessionLock(context.Background(), db, ks[i%2], func(ctx context.Context, conn *sql.Conn) error {
						_, err := conn.BeginTx(ctx, nil)
						return err
					})
					if err == nil || !strings.Contains(err.Error(), "transaction still open") {
						t.Errorf("got %v; want an error saying fn left a transaction open", err)
						return
					}
				}
			})
			t.Cleanup(func() {
				for _, k := range ks {
					pgtest.AwaitFree(t, tg.DB, k)
				}
			})
		}
		wg.Wait()
	})
}

// testWithSessionLockHeartbeatCtxEnds: a scope with a heartbeat
// whose ctx ends while fn runs still stops its heartbeat, releases its
// lock and returns its connection, whatever the order in which the two
// end.
func testWithSessionLockHeartbeatCtxEnds(t *testing.T) {
	pgtest.EachDriver(t, pgAllDrivers, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		keys := newPGKeys()
		db := tg.Server.Open(t, tg.Driver)
		for range 20 {
			key := keys.next()
			ctx, cancel := context.WithCancel(context.Background())
			_ = advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error {
				cancel()
				return nil
			}, advisory.Heartbeat(time.Hour))
			pgtest.AwaitFree(t, tg.DB, key)
			pgtest.Await(t, "every connection back in the pool after the scope returned", func() (bool, error) { return db.Stats().InUse == 0, nil })
		}
	})
}

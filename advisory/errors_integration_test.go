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

// Integration tests of the errors a real server raises (errors.go), and of
// bad input.

// TestErrorsIntegration runs the integration tests of errors, one subtest
// a theme, each on every server and driver.
func TestErrorsIntegration(t *testing.T) {
	t.Run("Deadlock", testErrorsDeadlock)
	t.Run("DeadlockVictimSurvives", testErrorsDeadlockVictimSurvives)
	t.Run("LockTableFull", testErrorsLockTableFull)
	t.Run("StatementTimeoutIsLockTimeout", testErrorsStatementTimeoutIsLockTimeout)
	t.Run("BadInput", testErrorsBadInput)
}

func testErrorsDeadlock(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()

		t.Run("Session", func(t *testing.T) {
			k := [2]advisory.Key{keys.next(), keys.nextPair()}
			conns := [2]*sql.Conn{pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)}
			var pids [2]int
			for i, c := range conns {
				pids[i] = pgtest.PID(t, c)
				pgtest.Exec(t, c, "SET deadlock_timeout = '50ms'")
				if err := advisory.Lock(ctx, c, k[i]); err != nil {
					t.Fatal(err)
				}
			}
			// Each session waits for the other's key.
			type result struct {
				i   int
				err error
			}
			results := make(chan result, 2)
			go func() { results <- result{0, advisory.Lock(ctx, conns[0], k[1])} }()
			pgWaitWaiting(t, tg.DB, pids[0], k[1])
			go func() { results <- result{1, advisory.Lock(ctx, conns[1], k[0])} }()

			// The server fails one wait; that session is closed, which
			// releases its key, and the other is granted.
			first, second := <-results, <-results
			loser, winner := first, second
			if first.err == nil {
				loser, winner = second, first
			}
			if !errors.Is(loser.err, advisory.ErrDeadlock) || winner.err != nil {
				t.Fatalf("crossed Locks returned %v and %v; want one ErrDeadlock and one nil", first.err, second.err)
			}
			if code := pgSQLState(loser.err); code != "40P01" {
				t.Errorf("driver error SQLSTATE %q; want 40P01 reachable with errors.As", code)
			}
			pgRequireDiscarded(t, conns[loser.i])
			pgWaitGone(t, tg.DB, pids[loser.i])
			w := winner.i
			pgRequireHolds(t, tg.DB, pids[w], k[0], false)
			pgRequireHolds(t, tg.DB, pids[w], k[1], false)
			if err := advisory.UnlockKeys(ctx, conns[w], k[0], k[1]); err != nil {
				t.Fatal(err)
			}
			pgtest.Exec(t, conns[w], "RESET deadlock_timeout")
		})

		t.Run("Xact", func(t *testing.T) {
			k := [2]advisory.Key{keys.next(), keys.nextPair()}
			var txs [2]*sql.Tx
			var pids [2]int
			for i := range txs {
				tx, err := tg.DB.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				txs[i], pids[i] = tx, pgtest.PID(t, tx)
				pgtest.Exec(t, tx, "SET LOCAL deadlock_timeout = '50ms'")
				if err := advisory.XactLock(ctx, tx, k[i]); err != nil {
					t.Fatal(err)
				}
			}
			type result struct {
				i   int
				err error
			}
			results := make(chan result, 2)
			go func() { results <- result{0, advisory.XactLock(ctx, txs[0], k[1])} }()
			pgWaitWaiting(t, tg.DB, pids[0], k[1])
			go func() { results <- result{1, advisory.XactLock(ctx, txs[1], k[0])} }()

			// The server fails one wait. It waited under a savepoint,
			// so its transaction is aborted but keeps the lock it took
			// before until it rolls back; then the other wait is
			// granted.
			loser := <-results
			if !errors.Is(loser.err, advisory.ErrDeadlock) {
				t.Fatalf("the first crossed XactLock to return returned %v; want ErrDeadlock", loser.err)
			}
			if code := pgSQLState(loser.err); code != "40P01" {
				t.Errorf("driver error SQLSTATE %q; want 40P01 reachable with errors.As", code)
			}
			if err := txs[loser.i].Rollback(); err != nil {
				t.Fatal(err)
			}
			pgRequireNoLocks(t, tg.DB, pids[loser.i])
			winner := <-results
			if winner.err != nil {
				t.Fatalf("the other crossed XactLock returned %v; want nil", winner.err)
			}
			pgRequireHolds(t, tg.DB, pids[winner.i], k[0], false)
			pgRequireHolds(t, tg.DB, pids[winner.i], k[1], false)
			if err := txs[winner.i].Commit(); err != nil {
				t.Fatal(err)
			}
			pgRequireFree(t, tg.DB, k[0])
			pgRequireFree(t, tg.DB, k[1])
		})
	})
}

// lockTableSettings is what the dedicated servers of
// TestErrorsIntegration/LockTableFull start with: a lock table so small that it
// overflows at under a thousand advisory locks.
var lockTableSettings = []string{"-c", "max_locks_per_transaction=10", "-c", "max_connections=20"}

// lockTableKeys is how many keys overflow the dedicated servers' lock
// table.
const lockTableKeys = 1600

func testErrorsLockTableFull(t *testing.T) {
	servers := pgtest.StartServer(t, lockTableSettings...)
	dedicated := servers != nil
	if !dedicated {
		// PGADVISORY_TEST_DSN: no dedicated server can be started, so
		// overflow the shared ones.
		t.Log("no dedicated servers with PGADVISORY_TEST_DSN; overflowing the lock table of the shared servers")
		servers = pgtest.Servers(t)
	}
	for _, s := range servers {
		for _, d := range pgtest.Drivers {
			// Not parallel: a full lock table fails every session of the
			// server.
			t.Run(s.Name+"/"+d, func(t *testing.T) {
				db := s.Open(t, d)
				ctx := context.Background()
				var capacity int
				err := db.QueryRowContext(ctx, `SELECT current_setting('max_locks_per_transaction')::int *
					(current_setting('max_connections')::int + current_setting('max_prepared_transactions')::int)`).Scan(&capacity)
				if err != nil {
					t.Fatal(err)
				}
				n := lockTableKeys
				if !dedicated {
					// Shared memory has slack beyond the nominal size: go
					// well past it.
					n = 4*capacity + 2000
				}
				gen := newPGKeys()
				keys := make([]advisory.Key, n)
				for i := range keys {
					keys[i] = gen.next()
				}
				t.Logf("lock table sized for %d locks; taking %d", capacity, n)

				t.Run("FailedStatementKeepsWhatItTook", func(t *testing.T) {
					// Why LockKeys must close the session: the same
					// statement, sent by hand, fails partway and leaves
					// the session holding the locks it took first.
					conn := pgtest.Conn(t, db)
					pid := pgtest.PID(t, conn)
					var b strings.Builder
					b.WriteString("SELECT pg_advisory_lock(k) FROM (VALUES ")
					for i, k := range keys {
						if i > 0 {
							b.WriteByte(',')
						}
						b.WriteString("(" + pgArg(k) + ")")
					}
					b.WriteString(") AS v(k)")
					_, err := conn.ExecContext(ctx, b.String())
					if code := pgSQLState(err); code != "53200" {
						t.Fatalf("the statement by hand = %v; want SQLSTATE 53200", err)
					}
					// The table is full, so no session can read pg_locks;
					// unlocking the first key asks the server whether it is
					// still held.
					var kept bool
					if err := conn.QueryRowContext(ctx, "SELECT pg_advisory_unlock("+pgArg(keys[0])+")").Scan(&kept); err != nil {
						t.Fatal(err)
					}
					if !kept {
						t.Fatal("the failed statement kept no lock on its first key; want it kept")
					}
					pgDiscard(conn)
					pgWaitGone(t, db, pid)
				})

				t.Run("LockKeys", func(t *testing.T) {
					conn := pgtest.Conn(t, db)
					pid := pgtest.PID(t, conn)
					err := advisory.LockKeys(ctx, conn, keys...)
					checkLockTableFull(t, err)
					// The statement failed partway, keeping the locks it
					// took: the session is closed, and they go with it.
					pgRequireDiscarded(t, conn)
					pgWaitGone(t, db, pid)
				})

				t.Run("XactLockKeys", func(t *testing.T) {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					defer tx.Rollback()
					pid := pgtest.PID(t, tx)
					checkLockTableFull(t, advisory.XactLockKeys(ctx, tx, keys...))
					if err := tx.Rollback(); err != nil {
						t.Fatal(err)
					}
					pgRequireNoLocks(t, db, pid)
				})

				t.Run("Locker", func(t *testing.T) {
					// A Locker's try fails alone: the connection, and
					// the leases already on it, go on.
					lk := newLocker(t, db, advisory.LockerConfig{MaxConns: 2})
					var ls []*advisory.Lease
					var err error
					for _, k := range keys {
						var l *advisory.Lease
						if l, err = lk.Acquire(ctx, k); err != nil {
							break
						}
						ls = append(ls, l)
					}
					checkLockTableFull(t, err)
					if len(ls) == 0 {
						t.Fatal("the Locker took no key before the table was full")
					}
					t.Logf("the Locker held %d keys when the table was full", len(ls))
					if err := ls[0].Release(ctx); err != nil {
						t.Fatalf("Release with the table full: %v", err)
					}
					l, err := lk.Acquire(ctx, keys[0])
					if err != nil {
						t.Fatalf("Acquire after a release made room: %v", err)
					}
					ls[0] = l
					for _, l := range ls {
						if l.Err() != nil {
							t.Fatalf("a lease was lost to the full table: %v", l.Err())
						}
					}
					if err := lk.Close(ctx); err != nil {
						t.Fatal(err)
					}
					for _, k := range keys[:len(ls)] {
						pgRequireFree(t, db, k)
					}
				})

				// The server recovers: a few keys lock fine.
				conn := pgtest.Conn(t, db)
				if err := advisory.LockKeys(ctx, conn, keys[:10]...); err != nil {
					t.Fatalf("LockKeys of 10 keys after the overflow: %v", err)
				}
				if err := advisory.UnlockAll(ctx, conn); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// checkLockTableFull fails t unless err reports a full lock table, names
// max_locks_per_transaction, and keeps the driver's 53200 reachable.
func checkLockTableFull(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, advisory.ErrLockTableFull) {
		t.Fatalf("taking more keys than the lock table holds = %v; want ErrLockTableFull", err)
	}
	if !strings.Contains(err.Error(), "max_locks_per_transaction") {
		t.Errorf("error %q does not point at max_locks_per_transaction", err)
	}
	if code := pgSQLState(err); code != "53200" {
		t.Errorf("driver error SQLSTATE %q; want 53200 reachable with errors.As", code)
	}
}

func testErrorsBadInput(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		k := newPGKeys().next()
		// db is never used for real: a bad call must fail before it takes
		// a connection.
		db := tg.Server.Open(t, tg.Driver)
		conn := pgtest.Conn(t, tg.DB)
		pid := pgtest.PID(t, conn)
		tx, err := tg.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		fnRan := false
		fn := func(context.Context, *sql.Tx) error { fnRan = true; return nil }
		sfn := func(context.Context, *sql.Conn) error { fnRan = true; return nil }
		noConn, noTx, noDB := (*sql.Conn)(nil), (*sql.Tx)(nil), (*sql.DB)(nil)
		ignore := func(_ bool, err error) error { return err }

		tests := []struct {
			name string
			want string // in the message
			call func() error
		}{
			{"LockNilConn", "nil", func() error { return advisory.Lock(ctx, noConn, k) }},
			{"LockSharedNilConn", "nil", func() error { return advisory.LockShared(ctx, noConn, k) }},
			{"TryLockNilConn", "nil", func() error { return ignore(advisory.TryLock(ctx, noConn, k)) }},
			{"TryLockSharedNilConn", "nil", func() error { return ignore(advisory.TryLockShared(ctx, noConn, k)) }},
			{"LockKeysNilConn", "nil", func() error { return advisory.LockKeys(ctx, noConn, k) }},
			{"UnlockNilConn", "nil", func() error { return advisory.Unlock(ctx, noConn, k) }},
			{"UnlockSharedNilConn", "nil", func() error { return advisory.UnlockShared(ctx, noConn, k) }},
			{"UnlockKeysNilConn", "nil", func() error { return advisory.UnlockKeys(ctx, noConn, k) }},
			{"UnlockAllNilConn", "nil", func() error { return advisory.UnlockAll(ctx, noConn) }},
			{"XactLockNilTx", "nil", func() error { return advisory.XactLock(ctx, noTx, k) }},
			{"XactLockSharedNilTx", "nil", func() error { return advisory.XactLockShared(ctx, noTx, k) }},
			{"TryXactLockNilTx", "nil", func() error { return ignore(advisory.TryXactLock(ctx, noTx, k)) }},
			{"TryXactLockSharedNilTx", "nil", func() error { return ignore(advisory.TryXactLockShared(ctx, noTx, k)) }},
			{"XactLockKeysNilTx", "nil", func() error { return advisory.XactLockKeys(ctx, noTx, k) }},
			{"LockKeysNoKeys", "no keys", func() error { return advisory.LockKeys(ctx, conn) }},
			{"UnlockKeysNoKeys", "no keys", func() error { return advisory.UnlockKeys(ctx, conn) }},
			{"XactLockKeysNoKeys", "no keys", func() error { return advisory.XactLockKeys(ctx, tx) }},
			{"WithXactLockNilDB", "nil", func() error { return advisory.WithXactLock(ctx, noDB, k, fn) }},
			{"WithSessionLockNilDB", "nil", func() error { return advisory.WithSessionLock(ctx, noDB, k, sfn) }},
			{"WithXactLockNilFn", "nil", func() error { return advisory.WithXactLock(ctx, db, k, nil) }},
			{"WithSessionLockNilFn", "nil", func() error { return advisory.WithSessionLock(ctx, db, k, nil) }},
			{"WithXactLockWaitNegative", "Wait", func() error { return advisory.WithXactLock(ctx, db, k, fn, advisory.Wait(-time.Second)) }},
			{"WithSessionLockWaitNegative", "Wait", func() error {
				return advisory.WithSessionLock(ctx, db, k, sfn, advisory.Wait(-time.Second))
			}},
			{"WithXactLockWaitTooLong", "Wait", func() error { return advisory.WithXactLock(ctx, db, k, fn, advisory.Wait(1000*time.Hour)) }},
			{"ParseKey", "malformed", func() error { _, err := advisory.ParseKey("1:2:3"); return err }},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				fnRan = false
				err := func() (err error) {
					defer func() {
						if p := recover(); p != nil {
							err = fmt.Errorf("panicked: %v", p)
							t.Errorf("panic on bad input: %v", p)
						}
					}()
					return tt.call()
				}()
				if err == nil {
					t.Fatal("no error for bad input")
				}
				if !strings.HasPrefix(err.Error(), "advisory: ") || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error %q; want one prefixed \"advisory: \" that mentions %q", err, tt.want)
				}
				if fnRan {
					t.Error("fn ran")
				}
			})
		}

		// Nothing was sent: conn and tx are as they were, and db never
		// opened a connection.
		if n := db.Stats().OpenConnections; n != 0 {
			t.Errorf("bad calls opened %d connections on db", n)
		}
		if got := pgtest.PID(t, conn); got != pid {
			t.Errorf("conn's session changed from %d to %d", pid, got)
		}
		pgRequireNoLocks(t, tg.DB, pid)
		if err := tx.Commit(); err != nil {
			t.Errorf("tx after bad calls: %v", err)
		}
	})
}

// testErrorsStatementTimeoutIsLockTimeout: a wait that a server-side
// statement_timeout ends while ctx is live matches ErrLockTimeout, for the
// plain functions and for the scopes with a longer Timeout.
func testErrorsStatementTimeoutIsLockTimeout(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		holder := pgtest.Conn(t, tg.DB)
		db := pgOpenOne(t, tg)
		pgtest.Exec(t, db, "SET statement_timeout = 150")
		for _, tc := range []struct {
			name string
			wait func(key advisory.Key) error
		}{
			{"Lock", func(key advisory.Key) error {
				conn := pgtest.Conn(t, db)
				defer conn.Close()
				return advisory.Lock(ctx, conn, key)
			}},
			{"WithXactLock", func(key advisory.Key) error {
				return advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error { return nil },
					advisory.Wait(time.Minute))
			}},
			{"WithSessionLock", func(key advisory.Key) error {
				return advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error { return nil },
					advisory.Wait(time.Minute))
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				key := keys.next()
				if err := advisory.Lock(ctx, holder, key); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = advisory.Unlock(ctx, holder, key) }()
				if err := tc.wait(key); !errors.Is(err, advisory.ErrLockTimeout) {
					t.Fatalf("got %v; want ErrLockTimeout", err)
				}
				// The session keeps its statement_timeout unless it
				// was closed; set it again for the next case.
				pgtest.Exec(t, db, "SET statement_timeout = 150")
			})
		}
	})
}

// testErrorsDeadlockVictimSurvives, a server fact shown with plain SQL and
// database/sql, without the library's helpers: when the server breaks a
// deadlock between two sessions' plain pg_advisory_lock calls, only the
// victim's statement fails. Its session lives on and keeps the key it took
// before, so a caller that pools it leaks that lock.
// (TestErrorsIntegration/Deadlock shows that the library closes the
// victim's session instead.)
func testErrorsDeadlockVictimSurvives(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		keys := newPGKeys()
		k := [2]advisory.Key{keys.next(), keys.next()}
		conns := [2]*sql.Conn{pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)}
		var pids [2]int
		for i, c := range conns {
			pids[i] = pgtest.PID(t, c)
			pgtest.Exec(t, c, "SET deadlock_timeout = '50ms'")
			pgtest.Exec(t, c, "SELECT pg_advisory_lock("+pgArg(k[i])+")")
		}
		errs := make(chan [2]any, 2)
		go func() {
			_, err := conns[0].ExecContext(context.Background(), "SELECT pg_advisory_lock("+pgArg(k[1])+")")
			errs <- [2]any{0, err}
		}()
		pgWaitWaiting(t, tg.DB, pids[0], k[1])
		go func() {
			_, err := conns[1].ExecContext(context.Background(), "SELECT pg_advisory_lock("+pgArg(k[0])+")")
			errs <- [2]any{1, err}
		}()

		// The victim's statement fails with 40P01 first: the other wait
		// is granted only once the victim lets go of its key.
		first := <-errs
		victim := first[0].(int)
		if err, _ := first[1].(error); pgSQLState(err) != "40P01" {
			t.Fatalf("the first statement to return gave %v; want SQLSTATE 40P01", err)
		}
		if got := pgtest.PID(t, conns[victim]); got != pids[victim] {
			t.Fatalf("the victim's session changed from %d to %d", pids[victim], got)
		}
		// The victim still holds the key it took before the deadlock.
		pgRequireHolds(t, tg.DB, pids[victim], k[victim], false)

		// Releasing it lets the other session through.
		pgtest.Exec(t, conns[victim], "SELECT pg_advisory_unlock_all()")
		if second := <-errs; second[1] != nil {
			t.Fatalf("the survivor's wait: %v", second[1])
		}
		for _, c := range conns {
			pgtest.Exec(t, c, "SELECT pg_advisory_unlock_all()")
			pgtest.Exec(t, c, "RESET deadlock_timeout")
		}
	})
}

package pgxlock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// sessionOps are the session lock calls on one of the two kinds of
// connection, so that each test runs on both.
type sessionOps struct {
	tryLock, tryLockShared func(ctx context.Context, key advisory.Key) (bool, error)
	lock, lockShared       func(ctx context.Context, key advisory.Key) error
	unlock, unlockShared   func(ctx context.Context, key advisory.Key) error
	unlockAll              func(ctx context.Context) error
	pid                    int
	closed                 func() bool // the connection has been closed
}

// opsOf returns the session lock calls on conn.
func opsOf[C pgxlock.Conn](tb testing.TB, conn C, pgxConn *pgx.Conn, q querier) *sessionOps {
	return &sessionOps{
		tryLock:       func(ctx context.Context, k advisory.Key) (bool, error) { return pgxlock.TryLock(ctx, conn, k) },
		tryLockShared: func(ctx context.Context, k advisory.Key) (bool, error) { return pgxlock.TryLockShared(ctx, conn, k) },
		lock:          func(ctx context.Context, k advisory.Key) error { return pgxlock.Lock(ctx, conn, k) },
		lockShared:    func(ctx context.Context, k advisory.Key) error { return pgxlock.LockShared(ctx, conn, k) },
		unlock:        func(ctx context.Context, k advisory.Key) error { return pgxlock.Unlock(ctx, conn, k) },
		unlockShared:  func(ctx context.Context, k advisory.Key) error { return pgxlock.UnlockShared(ctx, conn, k) },
		unlockAll:     func(ctx context.Context) error { return pgxlock.UnlockAll(ctx, conn) },
		pid:           pidOf(tb, q),
		closed:        pgxConn.IsClosed,
	}
}

// connKinds make a session of each kind the session functions take: a
// connection of a pool, and a *pgx.Conn of its own.
var connKinds = []struct {
	name string
	open func(tb testing.TB, s *pgtest.Server, pool *pgxpool.Pool) *sessionOps
}{
	{"PoolConn", func(tb testing.TB, _ *pgtest.Server, pool *pgxpool.Pool) *sessionOps {
		c := acquire(tb, pool)
		return opsOf(tb, c, c.Conn(), c)
	}},
	{"PgxConn", func(tb testing.TB, s *pgtest.Server, _ *pgxpool.Pool) *sessionOps {
		c := connect(tb, s.DSN)
		return opsOf(tb, c, c, c)
	}},
}

// TestSessionIntegration checks the session lock functions on both kinds
// of connection: who holds what in pg_locks after each call, tries that
// find the key busy, shared locks, stacking, waits, and the errors.
func TestSessionIntegration(t *testing.T) {
	eachServer(t, func(t *testing.T, s *pgtest.Server, obs *sql.DB) {
		ctx := context.Background()
		pool := newPool(t, s.DSN, nil)
		for _, kind := range connKinds {
			t.Run(kind.name, func(t *testing.T) {
				tests := []struct {
					name string
					run  func(t *testing.T, a, b *sessionOps)
				}{
					{"TryLockBusy", func(t *testing.T, a, b *sessionOps) {
						k := randomKey()
						mustTry(t, a.tryLock, k, true)
						requireHeld(t, obs, k, false, a.pid)
						mustTry(t, b.tryLock, k, false)
						mustTry(t, b.tryLockShared, k, false)
						if err := a.unlock(ctx, k); err != nil {
							t.Fatal(err)
						}
						requireHeld(t, obs, k, false)
						mustTry(t, b.tryLock, k, true)
						requireHeld(t, obs, k, false, b.pid)
						if err := b.unlock(ctx, k); err != nil {
							t.Fatal(err)
						}
						if a.closed() || b.closed() {
							t.Fatal("a busy try closed a connection")
						}
					}},
					{"Shared", func(t *testing.T, a, b *sessionOps) {
						k := randomKey()
						mustTry(t, a.tryLockShared, k, true)
						if err := b.lockShared(ctx, k); err != nil {
							t.Fatal(err)
						}
						requireHeld(t, obs, k, true, a.pid, b.pid)
						mustTry(t, b.tryLock, k, false)
						for _, o := range []*sessionOps{a, b} {
							if err := o.unlockShared(ctx, k); err != nil {
								t.Fatal(err)
							}
						}
						requireHeld(t, obs, k, true)
					}},
					{"Stacks", func(t *testing.T, a, b *sessionOps) {
						k := randomKey()
						for range 2 {
							if err := a.lock(ctx, k); err != nil {
								t.Fatal(err)
							}
						}
						if err := a.unlock(ctx, k); err != nil {
							t.Fatal(err)
						}
						mustTry(t, b.tryLock, k, false)
						if err := a.unlockAll(ctx); err != nil {
							t.Fatal(err)
						}
						requireHeld(t, obs, k, false)
					}},
					{"LockWaits", func(t *testing.T, a, b *sessionOps) {
						k := randomKey()
						mustTry(t, a.tryLock, k, true)
						done := make(chan error, 1)
						go func() { done <- b.lock(ctx, k) }()
						pgtest.AwaitWaiting(t, obs, k)
						if err := a.unlock(ctx, k); err != nil {
							t.Fatal(err)
						}
						if err := <-done; err != nil {
							t.Fatalf("Lock after the holder let go: %v", err)
						}
						requireHeld(t, obs, k, false, b.pid)
						if err := b.unlock(ctx, k); err != nil {
							t.Fatal(err)
						}
					}},
					{"LockCancelled", func(t *testing.T, a, b *sessionOps) {
						k := randomKey()
						mustTry(t, a.tryLock, k, true)
						cctx, cancel := context.WithCancel(ctx)
						done := make(chan error, 1)
						go func() { done <- b.lock(cctx, k) }()
						pgtest.AwaitWaiting(t, obs, k)
						cancel()
						err := <-done
						if !errors.Is(err, context.Canceled) {
							t.Fatalf("Lock under a cancelled ctx = %v; want context.Canceled", err)
						}
						if !b.closed() {
							t.Fatal("a wait that ctx ended left its connection open: the lock may have been granted")
						}
						pgtest.AwaitGone(t, obs, b.pid)
						if err := a.unlock(ctx, k); err != nil {
							t.Fatal(err)
						}
					}},
					{"UnlockNotHeld", func(t *testing.T, a, _ *sessionOps) {
						err := a.unlock(ctx, randomKey())
						if !errors.Is(err, advisory.ErrNotHeld) {
							t.Fatalf("Unlock of a key not held = %v; want ErrNotHeld", err)
						}
						if !a.closed() {
							t.Fatal("an unlock that found the key not held left the connection open")
						}
						pgtest.AwaitGone(t, obs, a.pid)
					}},
				}
				for _, tt := range tests {
					t.Run(tt.name, func(t *testing.T) {
						tt.run(t, kind.open(t, s, pool), kind.open(t, s, pool))
					})
				}
			})
		}
	})
}

// mustTry fails t unless try(key) reports want without error.
func mustTry(t *testing.T, try func(context.Context, advisory.Key) (bool, error), key advisory.Key, want bool) {
	t.Helper()
	ok, err := try(context.Background(), key)
	if err != nil || ok != want {
		t.Fatalf("try %v = %v, %v; want %v, nil", key, ok, err, want)
	}
}

// TestDiscardDestroysPoolConn checks what a session in doubt becomes on a
// *pgxpool.Conn: the lock call closes its pgx connection, every later
// statement on the *pgxpool.Conn fails (and does not panic), and its
// Release destroys the connection, which the pool never hands out again.
func TestDiscardDestroysPoolConn(t *testing.T) {
	eachServer(t, func(t *testing.T, s *pgtest.Server, obs *sql.DB) {
		ctx := context.Background()
		var destroyed closedConns
		pool := newPool(t, s.DSN, func(cfg *pgxpool.Config) {
			destroyed.watch(cfg)
			cfg.MaxConns = 1
		})
		conn := acquire(t, pool)
		pc := conn.Conn()
		pid := pidOf(t, conn)
		k := randomKey()
		if err := pgxlock.Lock(ctx, conn, k); err != nil {
			t.Fatal(err)
		}
		// An unlock of another key finds it not held: the session is in
		// doubt, and holds k.
		if err := pgxlock.Unlock(ctx, conn, randomKey()); !errors.Is(err, advisory.ErrNotHeld) {
			t.Fatalf("Unlock = %v; want ErrNotHeld", err)
		}
		if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
			t.Fatal("a statement on a discarded *pgxpool.Conn succeeded")
		}
		if ok, err := pgxlock.TryLock(ctx, conn, k); ok || err == nil {
			t.Fatalf("TryLock on a discarded *pgxpool.Conn = %v, %v; want an error", ok, err)
		}
		conn.Release()
		pgtest.AwaitGone(t, obs, pid)
		pgtest.AwaitFree(t, obs, k)
		pgtest.Await(t, "the pool to destroy the discarded connection", func() (bool, error) {
			return destroyed.has(pc) && pool.Stat().TotalConns() == 0, nil
		})
		next := acquire(t, pool)
		if next.Conn() == pc || pidOf(t, next) == pid {
			t.Fatal("the pool handed out the discarded connection again")
		}
	})
}

// TestHijackLeavesNoConn backs the choice of Discard for a *pgxpool.Conn
// (see seam.go): after Hijack, the *pgxpool.Conn the caller still holds
// has no connection, and a statement on it panics instead of failing.
func TestHijackLeavesNoConn(t *testing.T) {
	eachServer(t, func(t *testing.T, s *pgtest.Server, _ *sql.DB) {
		pool := newPool(t, s.DSN, nil)
		conn := acquire(t, pool)
		c := conn.Hijack()
		defer c.Close(context.Background())
		defer func() {
			if recover() == nil {
				t.Fatal("Exec on a hijacked *pgxpool.Conn did not panic")
			}
		}()
		_, _ = conn.Exec(context.Background(), "SELECT 1")
	})
}

// TestNilArguments checks that every function refuses a nil connection,
// transaction, pool or fn with an error, without a server.
func TestNilArguments(t *testing.T) {
	ctx := context.Background()
	k := advisory.Int64Key(1)
	var pc *pgxpool.Conn
	var c *pgx.Conn
	fn := func(context.Context, pgx.Tx) error { return nil }
	tests := []struct {
		name string
		call func() error
	}{
		{"TryLockPoolConn", func() error { _, err := pgxlock.TryLock(ctx, pc, k); return err }},
		{"TryLockConn", func() error { _, err := pgxlock.TryLock(ctx, c, k); return err }},
		{"TryLockShared", func() error { _, err := pgxlock.TryLockShared(ctx, c, k); return err }},
		{"Lock", func() error { return pgxlock.Lock(ctx, pc, k) }},
		{"LockShared", func() error { return pgxlock.LockShared(ctx, c, k) }},
		{"Unlock", func() error { return pgxlock.Unlock(ctx, pc, k) }},
		{"UnlockShared", func() error { return pgxlock.UnlockShared(ctx, c, k) }},
		{"UnlockAll", func() error { return pgxlock.UnlockAll(ctx, pc) }},
		{"TryXactLock", func() error { _, err := pgxlock.TryXactLock(ctx, nil, k); return err }},
		{"TryXactLockShared", func() error { _, err := pgxlock.TryXactLockShared(ctx, nil, k); return err }},
		{"XactLock", func() error { return pgxlock.XactLock(ctx, nil, k) }},
		{"XactLockShared", func() error { return pgxlock.XactLockShared(ctx, nil, k) }},
		{"WithXactLockPool", func() error { return pgxlock.WithXactLock(ctx, nil, k, fn) }},
		{"WithXactLockTx", func() error { return pgxlock.WithXactLockTx(ctx, nil, k, fn) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); err == nil {
				t.Fatal("nil argument accepted")
			}
		})
	}
	if _, ok := pgxlock.TxFromContext(ctx); ok {
		t.Fatal("TxFromContext found a transaction in a bare context")
	}
}

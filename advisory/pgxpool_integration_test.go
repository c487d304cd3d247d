package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestPgxPoolDiscardIntegration proves that a session the library
// discards ends on a *sql.DB from stdlib.OpenDBFromPool, whose connections
// pgxpool lends: closing one there hands the session back to pgxpool,
// locks and all, unless the session is in a transaction, busy or closed;
// and database/sql closes a *sql.Conn only once a transaction open on it
// has ended.
func TestPgxPoolDiscardIntegration(t *testing.T) {
	for _, s := range pgtest.Servers(t) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, err := pgxpool.New(ctx, s.DSN)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			db := stdlib.OpenDBFromPool(pool)
			t.Cleanup(func() { db.Close() })
			look := s.Open(t, pgtest.DriverPQ)
			keys := newPGKeys()

			for _, tt := range []struct {
				name    string
				discard func(t *testing.T, k advisory.Key)
			}{
				{"UnlockNotHeld", func(t *testing.T, k advisory.Key) {
					conn := pgtest.Conn(t, db)
					if err := advisory.Lock(ctx, conn, k); err != nil {
						t.Fatal(err)
					}
					// A key not held puts the session in doubt: Unlock
					// discards it, and k with it.
					if err := advisory.Unlock(ctx, conn, keys.next()); !errors.Is(err, advisory.ErrNotHeld) {
						t.Fatalf("Unlock of a key not held: %v; want ErrNotHeld", err)
					}
					_ = conn.Close()
				}},
				{"ScopeCtxEnded", func(t *testing.T, k advisory.Key) {
					// A context that ends while fn runs leaves the
					// session in doubt: the scope on a caller's conn
					// releases its key and discards the session, with
					// the lock fn took on it, k.
					conn := pgtest.Conn(t, db)
					sctx, cancel := context.WithCancel(ctx)
					defer cancel()
					_ = advisory.WithSessionLockConn(sctx, conn, keys.next(), func(ctx context.Context, conn *sql.Conn) error {
						err := advisory.Lock(ctx, conn, k)
						cancel()
						return err
					})
					_ = conn.Close()
				}},
				{"ScopeTxLeftOpen", func(t *testing.T, k advisory.Key) {
					// fn leaves a transaction open on the caller's conn:
					// the scope closes the session under it, and then
					// database/sql rolls the transaction back, on a
					// goroutine of its own, as fn's context ends. Under
					// -race this also shows that pgxpool, destroying the
					// connection on its own goroutine, does not race that
					// rollback.
					conn := pgtest.Conn(t, db)
					err := advisory.WithSessionLockConn(ctx, conn, keys.next(), func(ctx context.Context, c *sql.Conn) error {
						if err := advisory.Lock(ctx, c, k); err != nil {
							return err
						}
						_, err := c.BeginTx(ctx, nil)
						return err
					})
					if err == nil {
						t.Error("WithSessionLockConn whose fn left a transaction open returned nil")
					}
					_ = conn.Close()
				}},
				{"CallerTxOpen", func(t *testing.T, k advisory.Key) {
					// A transaction the caller began on conn is open when
					// Unlock discards the session: database/sql closes
					// conn only once that transaction ends, and Unlock
					// waits for it, but the session, and k, must end now.
					conn := pgtest.Conn(t, db)
					if err := advisory.Lock(ctx, conn, k); err != nil {
						t.Fatal(err)
					}
					tx, err := conn.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					unlocked := make(chan error, 1)
					go func() { unlocked <- advisory.Unlock(ctx, conn, keys.next()) }()
					t.Cleanup(func() {
						_ = tx.Rollback()
						if err := <-unlocked; !errors.Is(err, advisory.ErrNotHeld) {
							t.Errorf("Unlock of a key not held: %v; want ErrNotHeld", err)
						}
						_ = conn.Close()
					})
				}},
			} {
				t.Run(tt.name, func(t *testing.T) {
					k := keys.next()
					tt.discard(t, k)
					// A lock of a discarded session ends with it.
					pgtest.AwaitFree(t, look, k)
				})
			}
		})
	}
}

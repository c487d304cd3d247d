package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// The round trips of every entry point (TestEntryPointsIntegration/RoundTrips;
// see entrypoints_integration_test.go).

// testEntryPointsRoundTrips proves through a counting proxy what each call
// costs on the wire. Every lock function is one round trip on both
// drivers: it sends one statement. On lib/pq the key is rendered into it,
// with no parameters, and lib/pq sends it through the simple query
// protocol. On pgx a single key goes as a parameter, and pgx prepares the
// statement the first time the connection sends its text: that first call
// may cost one round trip more, and every later one costs one, whatever
// its key. So each case runs twice, each time with a key not used before,
// and the second run is the one that must cost exactly its count.
func testEntryPointsRoundTrips(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		p := tg.Server.Proxy(t)
		srv := *tg.Server
		srv.DSN = p.DSN()
		db := srv.Open(t, tg.Driver)
		db.SetMaxOpenConns(1)
		conn := pgtest.Conn(t, db)
		// Warm up: the connection exists, and a lock and an unlock have
		// run on it.
		pgtest.PID(t, conn)
		warm := keys.next()
		if err := advisory.Lock(ctx, conn, warm); err != nil {
			t.Fatal(err)
		}
		if err := advisory.Unlock(ctx, conn, warm); err != nil {
			t.Fatal(err)
		}

		// A second session holds busy, so that tries can fail.
		busy := keys.next()
		holder := pgtest.Conn(t, tg.DB)
		if err := advisory.Lock(ctx, holder, busy); err != nil {
			t.Fatal(err)
		}

		// measure counts the round trips of the call setup returns, twice:
		// on pgx the first run may prepare a statement, the second must
		// not; lib/pq prepares nothing.
		prepares := tg.Driver != pgtest.DriverPQ
		measure := func(t *testing.T, want int64, setup func() func() error) {
			t.Helper()
			for run := range 2 {
				f := setup()
				p.Reset()
				err := f()
				got := p.Flights()
				if err != nil {
					t.Fatal(err)
				}
				if run == 0 && prepares && (got < want || got > want+1) {
					t.Errorf("first run: %d round trips; want %d, or %d with a prepare", got, want, want+1)
				}
				if (run == 1 || !prepares) && got != want {
					t.Errorf("%d round trips; want %d", got, want)
				}
			}
		}
		tryOK := func(want bool) func(bool, error) error {
			return func(ok bool, err error) error {
				if err == nil && ok != want {
					err = errors.New("try reported the wrong outcome")
				}
				return err
			}
		}

		t.Run("Session", func(t *testing.T) {
			three := func() []advisory.Key { return []advisory.Key{keys.next(), keys.nextPair(), keys.next()} }
			tests := []struct {
				name string
				// setup runs unmeasured and returns the measured call.
				setup func(t *testing.T) func() error
			}{
				{"Lock", func(t *testing.T) func() error {
					k := keys.next()
					return func() error { return advisory.Lock(ctx, conn, k) }
				}},
				{"LockPair", func(t *testing.T) func() error {
					k := keys.nextPair()
					return func() error { return advisory.Lock(ctx, conn, k) }
				}},
				{"TryLock", func(t *testing.T) func() error {
					k := keys.next()
					return func() error { return tryOK(true)(advisory.TryLock(ctx, conn, k)) }
				}},
				{"TryLockBusy", func(t *testing.T) func() error {
					return func() error { return tryOK(false)(advisory.TryLock(ctx, conn, busy)) }
				}},
				{"Unlock", func(t *testing.T) func() error {
					k := keys.next()
					if err := advisory.Lock(ctx, conn, k); err != nil {
						t.Fatal(err)
					}
					return func() error { return advisory.Unlock(ctx, conn, k) }
				}},
				{"LockShared", func(t *testing.T) func() error {
					k := keys.next()
					return func() error { return advisory.LockShared(ctx, conn, k) }
				}},
				{"TryLockShared", func(t *testing.T) func() error {
					k := keys.next()
					return func() error { return tryOK(true)(advisory.TryLockShared(ctx, conn, k)) }
				}},
				{"UnlockShared", func(t *testing.T) func() error {
					k := keys.next()
					if err := advisory.LockShared(ctx, conn, k); err != nil {
						t.Fatal(err)
					}
					return func() error { return advisory.UnlockShared(ctx, conn, k) }
				}},
				{"UnlockAll", func(t *testing.T) func() error {
					if err := advisory.LockKeys(ctx, conn, three()...); err != nil {
						t.Fatal(err)
					}
					return func() error { return advisory.UnlockAll(ctx, conn) }
				}},
				{"LockKeys", func(t *testing.T) func() error {
					ks := three()
					return func() error { return advisory.LockKeys(ctx, conn, ks...) }
				}},
				{"UnlockKeys", func(t *testing.T) func() error {
					ks := three()
					if err := advisory.LockKeys(ctx, conn, ks...); err != nil {
						t.Fatal(err)
					}
					return func() error { return advisory.UnlockKeys(ctx, conn, ks...) }
				}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					measure(t, 1, func() func() error { return tt.setup(t) })
					if err := advisory.UnlockAll(ctx, conn); err != nil {
						t.Fatal(err)
					}
				})
			}
		})

		t.Run("Xact", func(t *testing.T) {
			tests := []struct {
				name string
				call func(tx *sql.Tx) error
			}{
				{"XactLock", func(tx *sql.Tx) error { return advisory.XactLock(ctx, tx, keys.next()) }},
				{"TryXactLock", func(tx *sql.Tx) error { return tryOK(true)(advisory.TryXactLock(ctx, tx, keys.next())) }},
				{"TryXactLockBusy", func(tx *sql.Tx) error { return tryOK(false)(advisory.TryXactLock(ctx, tx, busy)) }},
				{"XactLockShared", func(tx *sql.Tx) error { return advisory.XactLockShared(ctx, tx, keys.nextPair()) }},
				{"TryXactLockShared", func(tx *sql.Tx) error { return tryOK(true)(advisory.TryXactLockShared(ctx, tx, keys.next())) }},
				{"XactLockKeys", func(tx *sql.Tx) error {
					return advisory.XactLockKeys(ctx, tx, keys.next(), keys.nextPair(), keys.next())
				}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					tx, err := conn.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					defer tx.Rollback()
					measure(t, 1, func() func() error { return func() error { return tt.call(tx) } })
				})
			}
		})

		// The scoped helpers take the pool's one connection.
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
		t.Run("Scoped", func(t *testing.T) {
			xfn := func(context.Context, *sql.Tx) error { return nil }
			sfn := func(context.Context, *sql.Conn) error { return nil }
			tests := []struct {
				name string
				want int64
				call func() error
			}{
				// BEGIN, the lock, COMMIT. database/sql's BeginTx costs one
				// round trip on both drivers: lib/pq and pgx send a simple
				// "BEGIN". Taking the pooled connection costs none here,
				// since the connection was just used (see below).
				{"WithXactLock", 3, func() error { return advisory.WithXactLock(ctx, db, keys.next(), xfn) }},
				// Timeout rides in the lock's round trip.
				{"WithXactLockTimeout", 3, func() error {
					return advisory.WithXactLock(ctx, db, keys.next(), xfn, advisory.Wait(time.Second))
				}},
				// BEGIN, the try, ROLLBACK.
				{"WithXactLockTryBusy", 3, func() error {
					err := advisory.WithXactLock(ctx, db, busy, xfn, advisory.Try())
					if errors.Is(err, advisory.ErrNotAcquired) {
						return nil
					}
					return errors.Join(errors.New("want ErrNotAcquired"), err)
				}},
				// The lock, the unlock.
				{"WithSessionLock", 2, func() error { return advisory.WithSessionLock(ctx, db, keys.next(), sfn) }},
				{"WithSessionLockTimeout", 2, func() error {
					return advisory.WithSessionLock(ctx, db, keys.next(), sfn, advisory.Wait(time.Second))
				}},
				// The try alone.
				{"WithSessionLockTryBusy", 1, func() error {
					err := advisory.WithSessionLock(ctx, db, busy, sfn, advisory.Try())
					if errors.Is(err, advisory.ErrNotAcquired) {
						return nil
					}
					return errors.Join(errors.New("want ErrNotAcquired"), err)
				}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					// pgx's session reset pings a pooled connection that
					// has not been taken from the pool for over a second,
					// one more round trip that is the driver's, not the
					// helper's: take the connection once just before.
					measure(t, tt.want, func() func() error {
						if err := db.PingContext(ctx); err != nil {
							t.Fatal(err)
						}
						return tt.call
					})
				})
			}
		})

		if err := advisory.Unlock(ctx, holder, busy); err != nil {
			t.Fatal(err)
		}
	})
}

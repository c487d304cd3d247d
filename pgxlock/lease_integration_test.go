package pgxlock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// TestLeaseIntegration checks leases on a pgx pool: a lease holds its key
// on a connection of the pool until Release, which gives the connection
// back; fencing tokens increase; a second lease on the key is refused; a
// lease whose backend is terminated is lost within a few heartbeats, and
// its connection is destroyed rather than pooled.
func TestLeaseIntegration(t *testing.T) {
	eachServer(t, func(t *testing.T, s *pgtest.Server, obs *sql.DB) {
		ctx := context.Background()
		pool := newPool(t, s.DSN, nil)
		key := randomKey()

		t.Run("HoldAndRelease", func(t *testing.T) {
			l, err := pgxlock.Acquire(ctx, pool, key, advisory.Fencing())
			if err != nil {
				t.Fatal(err)
			}
			pid := pgtest.AwaitHolder(t, obs, key)
			requireHeld(t, obs, key, false, pid)
			if n := pool.Stat().AcquiredConns(); n != 1 {
				t.Errorf("the pool lends %d connections with a lease held; want 1", n)
			}
			if _, err := pgxlock.Acquire(ctx, pool, key, advisory.Try()); !errors.Is(err, advisory.ErrNotAcquired) {
				t.Errorf("a second lease with Try = %v; want ErrNotAcquired", err)
			}
			first := l.Token()
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Errorf("a second Release = %v; want the first's nil", err)
			}
			if l.Context().Err() == nil {
				t.Error("the lease's context outlived Release")
			}
			pgtest.AwaitFree(t, obs, key)
			if n := pool.Stat().AcquiredConns(); n != 0 {
				t.Errorf("the pool lends %d connections after Release; want 0", n)
			}
			requireIdleClean(t, pool)

			l2, err := pgxlock.Acquire(ctx, pool, key, advisory.Fencing())
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Release(ctx)
			if first <= 0 || l2.Token() <= first {
				t.Errorf("fencing tokens %d then %d; want them positive and increasing", first, l2.Token())
			}
		})

		t.Run("Lost", func(t *testing.T) {
			k := randomKey()
			l, err := pgxlock.Acquire(ctx, pool, k, advisory.Heartbeat(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			pid := pgtest.AwaitHolder(t, obs, k)
			if _, err := obs.ExecContext(ctx, "SELECT pg_catalog.pg_terminate_backend($1)", pid); err != nil {
				t.Fatal(err)
			}
			select {
			case <-l.Context().Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the lease was not lost within 10 s of its backend's end")
			}
			if !errors.Is(l.Err(), advisory.ErrLockLost) {
				t.Errorf("Err = %v; want ErrLockLost", l.Err())
			}
			if err := l.Release(ctx); !errors.Is(err, advisory.ErrLockLost) {
				t.Errorf("Release = %v; want ErrLockLost", err)
			}
			pgtest.AwaitFree(t, obs, k)
			if n := pool.Stat().AcquiredConns(); n != 0 {
				t.Errorf("the pool lends %d connections after a lost lease's Release; want 0", n)
			}
			requireIdleClean(t, pool)
		})
	})
}

// TestLockerIntegration checks a Locker on a pgx pool: its leases hold
// their keys on the pool's connections, a conflicting acquisition with
// Try is refused, and Close releases them all and gives the connections
// back.
func TestLockerIntegration(t *testing.T) {
	eachServer(t, func(t *testing.T, s *pgtest.Server, obs *sql.DB) {
		ctx := context.Background()
		pool := newPool(t, s.DSN, nil)
		locker, err := pgxlock.NewLocker(pool, advisory.LockerConfig{MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		keys := []advisory.Key{randomKey(), randomKey(), randomKey()}
		var leases []*advisory.Lease
		for _, k := range keys {
			l, err := locker.Acquire(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, l)
			pgtest.AwaitHolder(t, obs, k)
		}
		if _, err := locker.Acquire(ctx, keys[0], advisory.Try()); !errors.Is(err, advisory.ErrNotAcquired) {
			t.Errorf("a conflicting acquisition with Try = %v; want ErrNotAcquired", err)
		}
		if err := leases[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
		pgtest.AwaitFree(t, obs, keys[0])
		if err := locker.Close(ctx); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			pgtest.AwaitFree(t, obs, k)
		}
		for _, l := range leases[1:] {
			if l.Context().Err() == nil {
				t.Error("a lease's context outlived the Locker's Close")
			}
		}
		if n := pool.Stat().AcquiredConns(); n != 0 {
			t.Errorf("the pool lends %d connections after Close; want 0", n)
		}
		requireIdleClean(t, pool)
	})
}

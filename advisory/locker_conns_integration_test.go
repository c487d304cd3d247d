package advisory_test

import (
	"context"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestLockerConnsIntegration: a Locker opens connections as its keys
// grow, KeysPerConn to a connection, within MaxConns; the first four
// open as soon as each holds a lease; with MaxConns open, the keys spread
// over them.
func TestLockerConnsIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		app := pgtest.UniqueName("advisory-")
		db := pgtest.OpenApp(t, tg, app)
		lk := newLocker(t, db, advisory.LockerConfig{MaxConns: 8, KeysPerConn: 10})
		keys := newPGKeys()
		var ls []*advisory.Lease
		for _, step := range []struct{ keys, backends int }{
			{4, 4},   // one lease on each of the first four
			{40, 4},  // ten on each
			{41, 5},  // a fifth for the 41st
			{60, 6},  // ten on each of six
			{120, 8}, // MaxConns: fifteen on each of eight
		} {
			for len(ls) < step.keys {
				l, err := lk.Acquire(ctx, keys.next(), advisory.Try())
				if err != nil {
					t.Fatal(err)
				}
				ls = append(ls, l)
			}
			if backends, locks := pgBackendsOfApp(t, tg.DB, app); backends != step.backends || locks != step.keys {
				t.Fatalf("%d locks on %d backends; want %d on %d", locks, backends, step.keys, step.backends)
			}
		}
		for _, l := range ls {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := lk.Close(ctx); err != nil {
			t.Fatal(err)
		}
		pgRequireNoAppLocks(t, tg.DB, app)
	})
}

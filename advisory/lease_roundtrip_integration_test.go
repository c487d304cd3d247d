package advisory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestLeaseRoundTripsIntegration proves through a counting proxy what a
// lease costs on the wire, alone ([advisory.Acquire]) and multiplexed
// ([advisory.Locker]): per acquisition, per release, and per heartbeat.
func TestLeaseRoundTripsIntegration(t *testing.T) {
	// The heartbeat of the leases whose heartbeats are counted; the
	// others beat too rarely to fall inside a measured call.
	const hb = 200 * time.Millisecond
	// The heartbeats counted.
	const beats = 10
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		p := tg.Server.Proxy(t)
		srv := *tg.Server
		srv.DSN = p.DSN()
		db := srv.Open(t, tg.Driver)
		db.SetMaxOpenConns(1)

		// count runs f and returns the round trips it took.
		count := func(t *testing.T, f func() error) int64 {
			t.Helper()
			p.Reset()
			if err := f(); err != nil {
				t.Fatal(err)
			}
			return p.Flights()
		}
		// checkBeats counts the round trips of the next n heartbeats of
		// l, with nothing else under way, however late a loaded machine
		// makes them: it counts the heartbeats that l made, not
		// intervals of time. It starts right after a heartbeat, so that
		// the next, and any heartbeat pgx's first preparation made
		// dearer, falls outside the count, and stops once n more have
		// ended. A heartbeat still in flight at either end may have its
		// round trip on the other side, so one a heartbeat is n±1; two
		// would be at least 2n-2.
		checkBeats := func(t *testing.T, what string, l *advisory.Lease, n int64) {
			t.Helper()
			before := advisory.Beats(l)
			pgtest.Await(t, what+": a heartbeat", func() (bool, error) { return advisory.Beats(l) > before, nil })
			p.Reset()
			start := advisory.Beats(l)
			pgtest.Await(t, fmt.Sprintf("%s: %d heartbeats", what, n), func() (bool, error) {
				return advisory.Beats(l)-start >= n, nil
			})
			got, made := p.Flights(), advisory.Beats(l)-start
			if got < made-1 || got > made+1 {
				t.Errorf("%s: %d round trips in %d heartbeats; want %d±1, one a heartbeat", what, got, made, made)
			}
		}
		check := func(t *testing.T, what string, got, want int64) {
			t.Helper()
			if got != want {
				t.Errorf("%s: %d round trips; want %d", what, got, want)
			}
		}

		t.Run("Acquire", func(t *testing.T) {
			// Warm: the pool's connection exists and has carried a
			// lease.
			l, err := advisory.Acquire(ctx, db, keys.next(), advisory.Heartbeat(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// The lock, and the statement that confirms it. On pgx
			// both carry the key as a parameter, and the warm-up
			// prepared them: a key new to the connection costs what
			// any other does.
			k := keys.next()
			// pgx's session reset pings a pooled connection that has
			// not been taken from the pool for over a second, a round
			// trip that is the driver's: take the connection once just
			// before each measured Acquire.
			ping := func() {
				if err := db.PingContext(ctx); err != nil {
					t.Fatal(err)
				}
			}
			ping()
			check(t, "Acquire of a key new to the connection", count(t, func() (err error) {
				l, err = advisory.Acquire(ctx, db, k, advisory.Heartbeat(time.Hour))
				return err
			}), 2)
			check(t, "Release", count(t, func() error { return l.Release(ctx) }), 1)
			ping()
			check(t, "Acquire of the same key again", count(t, func() (err error) {
				l, err = advisory.Acquire(ctx, db, k, advisory.Heartbeat(time.Hour))
				return err
			}), 2)
			check(t, "Release", count(t, func() error { return l.Release(ctx) }), 1)
			l, err = advisory.Acquire(ctx, db, keys.next(), advisory.Heartbeat(hb))
			if err != nil {
				t.Fatal(err)
			}
			checkBeats(t, "a lease's heartbeats", l, beats)
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("Locker", func(t *testing.T) {
			lk := newLocker(t, db, advisory.LockerConfig{MaxConns: 1, Heartbeat: time.Hour})
			// Warm: the Locker's connection is open.
			first, err := lk.Acquire(ctx, keys.next())
			if err != nil {
				t.Fatal(err)
			}
			var ls []*advisory.Lease
			for _, opts := range [][]advisory.LockOption{nil, {advisory.Try()}, {advisory.Shared()}, {advisory.Wait(time.Second)}} {
				check(t, "Locker.Acquire", count(t, func() error {
					l, err := lk.Acquire(ctx, keys.next(), as[advisory.LockerOption](opts)...)
					ls = append(ls, l)
					return err
				}), 1)
			}
			for _, l := range ls {
				check(t, "Release", count(t, func() error { return l.Release(ctx) }), 1)
			}
			// With a fencing token, the try returns a row, which pgx
			// sends prepared: the key is a parameter, so the try before
			// prepared it, and a new key costs one round trip.
			want := int64(1)
			key := keys.next()
			if _, err := lk.Acquire(ctx, keys.next(), advisory.Fencing()); err != nil {
				t.Fatal(err) // creates the sequence, if need be, and prepares the try
			}
			check(t, "Locker.Acquire with Fencing", count(t, func() error {
				_, err := lk.Acquire(ctx, key, advisory.Fencing())
				return err
			}), want)
			if err := first.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := lk.Close(ctx); err != nil {
				t.Fatal(err)
			}

			// One heartbeat proves all the leases on a connection. The
			// first is prepared by pgx: count from the second.
			lk = newLocker(t, db, advisory.LockerConfig{MaxConns: 1, Heartbeat: hb})
			var l *advisory.Lease
			for range 5 {
				if l, err = lk.Acquire(ctx, keys.next()); err != nil {
					t.Fatal(err)
				}
			}
			checkBeats(t, "the heartbeats of 5 leases on a connection", l, beats)
		})
	})
}

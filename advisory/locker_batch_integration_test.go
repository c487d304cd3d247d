package advisory_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestLockerReleasesTogether releases many leases of one connection at
// once, bigint and pair keys, exclusive and shared: the releases that
// queue behind a statement go together in one, and every key is released
// on the server, as another Locker that then takes each one shows.
func TestLockerReleasesTogether(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		lk := newLocker(t, tg.DB, advisory.LockerConfig{MaxConns: 1, Heartbeat: 5 * time.Second})
		type held struct {
			key advisory.Key
			l   *advisory.Lease
		}
		var hs []held
		for i := range 200 {
			key := keys.next()
			if i%2 == 1 {
				key = keys.nextPair()
			}
			var opts []advisory.LockerOption
			if i%4 >= 2 {
				opts = append(opts, advisory.Shared())
			}
			l, err := lk.Acquire(ctx, key, append(opts, advisory.Try())...)
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, held{key, l})
		}
		var wg sync.WaitGroup
		next := make(chan held)
		for range 32 {
			wg.Go(func() {
				for h := range next {
					if err := h.l.Release(ctx); err != nil {
						t.Errorf("Release of %v: %v", h.key, err)
					}
					if err := h.l.Err(); !errors.Is(err, context.Canceled) {
						t.Errorf("lease on %v after Release: Err %v", h.key, err)
					}
				}
			})
		}
		for _, h := range hs {
			next <- h
		}
		close(next)
		wg.Wait()
		other := newLocker(t, tg.DB, advisory.LockerConfig{MaxConns: 1})
		for _, h := range hs {
			l, err := other.Acquire(ctx, h.key, advisory.Try())
			if err != nil {
				t.Fatalf("%v after its Release: %v", h.key, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

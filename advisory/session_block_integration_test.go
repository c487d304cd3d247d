package advisory_test

import (
	"context"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// testSessionWaitInBlock waits for a busy key with Lock, on a session with
// no transaction block open and on one inside a block, each with a
// lock_timeout of its own: the slices bound their wait with lock_timeout,
// and after the wait the session's own is in force again. Outside a block
// the slice's bound ends with its statement; inside one, the slice puts it
// back, and only a session that tells a block truly gets that slice.
func testSessionWaitInBlock(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		for _, block := range []bool{false, true} {
			key := keys.next()
			holder, waiter := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
			if err := advisory.Lock(ctx, holder, key); err != nil {
				t.Fatal(err)
			}
			if block {
				pgtest.Exec(t, waiter, "BEGIN")
				pgtest.Exec(t, waiter, "SET LOCAL lock_timeout = '41s'")
			} else {
				pgtest.Exec(t, waiter, "SET lock_timeout = '41s'")
			}
			got := make(chan error, 1)
			go func() { got <- advisory.Lock(ctx, waiter, key) }()
			pgtest.AwaitWaiting(t, tg.DB, key)
			if err := advisory.Unlock(ctx, holder, key); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("block %v: Lock = %v; want the key once its holder let go", block, err)
			}
			if v := pgShow(t, waiter, "lock_timeout"); v != "41s" {
				t.Errorf("block %v: lock_timeout after the wait = %q; want the session's own, 41s", block, v)
			}
			pgRequireHolds(t, tg.DB, pgtest.PID(t, waiter), key, false)
			if block {
				pgtest.Exec(t, waiter, "COMMIT")
			}
			if err := advisory.Unlock(ctx, waiter, key); err != nil {
				t.Fatal(err)
			}
			pgtest.Exec(t, waiter, "RESET lock_timeout")
		}
	})
}

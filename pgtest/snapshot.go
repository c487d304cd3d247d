package pgtest

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// A Waiter waits for key on db, the way the call under test waits, and
// calls held while it holds the lock; once held returns, it releases the
// lock and returns.
type Waiter func(ctx context.Context, db *sql.DB, key Key, held func()) error

// SnapshotCheck says what [RequireNoSnapshotWait] checks.
type SnapshotCheck struct {
	// CIC: CREATE INDEX CONCURRENTLY, under lock_timeout = 8s, finishes
	// while the waiter waits. It waits for every transaction that held a
	// snapshot when it began, so a wait inside a transaction the caller
	// keeps open holds it back whatever the wait does.
	CIC bool
}

// deadRows is how many rows RequireNoSnapshotWait deletes while the waiter
// waits.
const deadRows = 2000

// RequireNoSnapshotWait proves that waiter, while it waits for a busy
// key, holds back neither VACUUM nor, when c.CIC, CREATE INDEX
// CONCURRENTLY, and that it gets the key within a moment of its release.
// In a database of its own on tg's server, a session holds key with plain
// SQL; waiter waits for it; 2,000 rows of a table are deleted; then VACUUM
// must remove every one of them within [PollTimeout], which it cannot
// while a statement whose snapshot is older than the delete runs in that
// database. It returns how long VACUUM took to remove them, counted from
// the delete, and how long the waiter took to get the key, counted from
// the release.
func RequireNoSnapshotWait(t *testing.T, tg Target, key Key, c SnapshotCheck, waiter Waiter) (vacuumed, handoff time.Duration) {
	t.Helper()
	d := NewDatabase(t, tg, "pgadvisory_snapshot")
	ctx := context.Background()
	Exec(t, d.DB, "CREATE TABLE public.dead (id int) WITH (autovacuum_enabled = off)")
	Exec(t, d.DB, "INSERT INTO public.dead SELECT pg_catalog.generate_series(1, $1)", deadRows)

	holder := Conn(t, d.DB)
	lock, unlock := "SELECT pg_catalog.pg_advisory_lock($1)", "SELECT pg_catalog.pg_advisory_unlock($1)"
	var args []any
	if a, b, ok := key.Pair(); ok {
		lock, unlock = "SELECT pg_catalog.pg_advisory_lock($1, $2)", "SELECT pg_catalog.pg_advisory_unlock($1, $2)"
		args = []any{a, b}
	} else {
		v, _ := key.Int64()
		args = []any{v}
	}
	Exec(t, holder, lock, args...)

	got := make(chan time.Time, 1)
	done := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		done <- waiter(wctx, d.DB, key, func() { got <- time.Now() })
	}()
	AwaitWaiting(t, d.DB, key)

	deleted := time.Now()
	Exec(t, d.DB, "DELETE FROM public.dead")
	var left int64
	err := Poll(20*time.Millisecond, func() (bool, error) {
		if _, err := d.DB.ExecContext(ctx, "VACUUM public.dead"); err != nil {
			return false, err
		}
		err := d.DB.QueryRowContext(ctx,
			"SELECT n_dead_tup FROM pg_catalog.pg_stat_user_tables WHERE relid = 'public.dead'::pg_catalog.regclass").Scan(&left)
		return left == 0, err
	})
	if err != nil {
		t.Fatalf("VACUUM left %d of %d dead rows while the waiter waited: %v", left, deadRows, err)
	}
	vacuumed = time.Since(deleted)

	if c.CIC {
		cic := Conn(t, d.DB)
		Exec(t, cic, "SET lock_timeout = '8s'")
		if _, err := cic.ExecContext(ctx, "CREATE INDEX CONCURRENTLY dead_id ON public.dead (id)"); err != nil {
			t.Fatalf("CREATE INDEX CONCURRENTLY while the waiter waited: %v", err)
		}
		Exec(t, cic, "RESET lock_timeout")
	}
	select {
	case at := <-got:
		t.Fatalf("the waiter got the key %v after the delete, while another session held it", at.Sub(deleted))
	case err := <-done:
		t.Fatalf("the waiter returned %v while another session held the key", err)
	default:
	}

	released := time.Now()
	Exec(t, holder, unlock, args...)
	// got is buffered: a waiter that gets the key, lets it go and returns
	// at once has made both got and done ready by the time this select
	// looks, which then picks either. So done alone is a failure only when
	// got stays empty.
	var waitErr error
	select {
	case at := <-got:
		handoff = at.Sub(released)
		waitErr = <-done
	case waitErr = <-done:
		select {
		case at := <-got:
			handoff = at.Sub(released)
		default:
			t.Fatalf("the waiter returned %v without getting the key", waitErr)
		}
	case <-time.After(PollTimeout):
		t.Fatalf("the waiter did not get the key within %v of its release", PollTimeout)
	}
	if waitErr != nil {
		t.Fatalf("the waiter: %v", waitErr)
	}
	AwaitFree(t, d.DB, key)
	return vacuumed, handoff
}

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

// testWithSessionLockMarks checks what a lock call made for a session
// scope with a heartbeat, under the context it gives fn, refuses: a
// session that bears the scope's own mark, or none, takes the lock; one
// that bears another lease's mark, as a transaction pooler could hand
// over, refuses with ErrSharedSession and takes nothing.
func testWithSessionLockMarks(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		db := tg.DB
		err := advisory.WithSessionLock(ctx, db, keys.next(), func(ctx context.Context, conn *sql.Conn) error {
			// The scope's own session bears its mark.
			if ok, err := advisory.TryLock(ctx, conn, keys.next()); err != nil || !ok {
				t.Errorf("TryLock on the scope's own session = %v, %v; want true, nil", ok, err)
			}
			// Another session, unmarked.
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if ok, err := advisory.TryXactLock(ctx, tx, keys.next()); err != nil || !ok {
				t.Errorf("TryXactLock on an unmarked session = %v, %v; want true, nil", ok, err)
			}
			// The same session once another lease's mark is on it.
			if _, err := tx.ExecContext(ctx, "SELECT pg_catalog.set_config('pgadvisory.lease', '12345', true)"); err != nil {
				return err
			}
			foreign := keys.next()
			ok, err := advisory.TryXactLock(ctx, tx, foreign)
			if ok || !errors.Is(err, advisory.ErrSharedSession) {
				t.Errorf("TryXactLock on a session that bears another lease's mark = %v, %v; want false, ErrSharedSession", ok, err)
			}
			if err := tx.Rollback(); err != nil {
				return err
			}
			if locks, err := pgtest.LocksOf(ctx, db, foreign); err != nil || len(locks) > 0 {
				t.Errorf("after the refusal, %s is held: %v (%v)", foreign, locks, err)
			}
			return nil
		}, advisory.Heartbeat(time.Hour)) // no beat while the test runs
		if err != nil {
			t.Fatal(err)
		}
	})
}

package advisory_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Server facts that docs/guide.md cites and the library's design rests on,
// shown with plain SQL and database/sql, without the library's helpers.

// TestDeadlockVictimSurvivesIntegration: when the server breaks a deadlock
// between two sessions' plain pg_advisory_lock calls, only the victim's
// statement fails. Its session lives on and keeps the key it took before,
// so a caller that pools it leaks that lock. (TestDeadlockIntegration
// shows that the library closes the victim's session instead.)
func TestDeadlockVictimSurvivesIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		keys := newPGKeys()
		k := [2]advisory.Key{keys.next(), keys.next()}
		conns := [2]*sql.Conn{pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)}
		var pids [2]int
		for i, c := range conns {
			pids[i] = pgtest.PID(t, c)
			pgtest.Exec(t, c, "SET deadlock_timeout = '50ms'")
			pgtest.Exec(t, c, "SELECT pg_advisory_lock("+pgArg(k[i])+")")
		}
		errs := make(chan [2]any, 2)
		go func() {
			_, err := conns[0].ExecContext(context.Background(), "SELECT pg_advisory_lock("+pgArg(k[1])+")")
			errs <- [2]any{0, err}
		}()
		pgWaitWaiting(t, tg.DB, pids[0], k[1])
		go func() {
			_, err := conns[1].ExecContext(context.Background(), "SELECT pg_advisory_lock("+pgArg(k[0])+")")
			errs <- [2]any{1, err}
		}()

		// The victim's statement fails with 40P01 first: the other wait
		// is granted only once the victim lets go of its key.
		first := <-errs
		victim := first[0].(int)
		if err, _ := first[1].(error); pgSQLState(err) != "40P01" {
			t.Fatalf("the first statement to return gave %v; want SQLSTATE 40P01", err)
		}
		if got := pgtest.PID(t, conns[victim]); got != pids[victim] {
			t.Fatalf("the victim's session changed from %d to %d", pids[victim], got)
		}
		// The victim still holds the key it took before the deadlock.
		pgRequireHolds(t, tg.DB, pids[victim], k[victim], false)

		// Releasing it lets the other session through.
		pgtest.Exec(t, conns[victim], "SELECT pg_advisory_unlock_all()")
		if second := <-errs; second[1] != nil {
			t.Fatalf("the survivor's wait: %v", second[1])
		}
		for _, c := range conns {
			pgtest.Exec(t, c, "SELECT pg_advisory_unlock_all()")
			pgtest.Exec(t, c, "RESET deadlock_timeout")
		}
	})
}

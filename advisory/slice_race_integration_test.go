package advisory_test

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// A slice of a wait can run out in the instant the server grants it the
// lock. TestSliceRunOutRaceIntegration times a holder's release to land
// as a slice's lock_timeout fires, thousands of times on each server and
// driver, and checks what each slice left on its session: one that ran
// out (55P03) must hold nothing, and one that took the key must hold it
// once, as a session lock; either way the session's lock_timeout is as
// it was.
//
// The control is the same race on a slice that takes the transaction
// lock and then the session lock in one select list, with no look for
// interrupts between them: a lock_timeout raised after the grant is
// raised after the session lock too, which the failed statement leaves
// held. The library's slice must never leak, on any server or driver. The
// control's leaks are logged, to show that the race is reached: they are
// too rare to assert (8 of about 3,000 slices that ran out, on a quiet
// machine).
//
// A slice for one key on a session with no transaction block open waits
// for the session lock itself (sqltext.DirectSliceStmt), and a grant as
// it runs out leaves the lock held, as the control does; the check that
// the wait sends after a slice that ran out (sqltext.HeldHere) must say
// so every time, and say nothing is held every other time.

// raceSliceMS is the bound of every slice the race sends, in milliseconds.
const raceSliceMS = 3

// raceRounds is how many slices of each form the race sends per server
// and driver.
const raceRounds = 1500

// sliceRacer races slices of one form against releases on a key of its
// own, adjusting the release's moment so that it lands as the slice runs
// out: later after a slice that took the key, sooner after one that ran
// out.
type sliceRacer struct {
	name           string
	slice          sqltext.Stmt // one slice, on key
	check          sqltext.Stmt // sent after a slice that ran out, if any: it tells whether the slice left key held
	key            int64
	holder, waiter *sql.Conn
	delay          time.Duration // from the slice's send to the release
	ranOut, leaked int
}

// round runs one race, and fails t on anything but a slice that took the
// key or ran out.
func (r *sliceRacer) round(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if _, err := r.holder.ExecContext(ctx, "SELECT pg_catalog.pg_advisory_lock($1)", r.key); err != nil {
		t.Fatalf("%s: holder: %v", r.name, err)
	}
	sent := make(chan time.Time, 1)
	done := make(chan error, 1)
	go func() {
		sent <- time.Now()
		_, err := r.waiter.ExecContext(ctx, r.slice.Query, r.slice.Args...)
		done <- err
	}()
	release := (<-sent).Add(r.delay)
	for time.Now().Before(release) {
		// A spin, since a sleep overshoots by more than the window.
	}
	if _, err := r.holder.ExecContext(ctx, "SELECT pg_catalog.pg_advisory_unlock($1)", r.key); err != nil {
		t.Fatalf("%s: holder release: %v", r.name, err)
	}
	err := <-done
	const step = 20 * time.Microsecond
	switch state := pgSQLState(err); {
	case err == nil:
		r.delay += step
	case state == "55P03":
		r.ranOut++
		r.delay = max(r.delay-step, 0)
	default:
		t.Fatalf("%s: slice: %v", r.name, err)
	}
	says := -1 // the check's answer
	if err != nil && r.check.Query != "" {
		res, err := r.waiter.ExecContext(ctx, r.check.Query, r.check.Args...)
		if err != nil {
			t.Fatalf("%s: check: %v", r.name, err)
		}
		n, _ := res.RowsAffected()
		says = int(n)
	}
	var held int
	var lockTimeout string
	if err := r.waiter.QueryRowContext(ctx, "SELECT pg_catalog.count(*), pg_catalog.current_setting('lock_timeout') "+
		"FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid() AND granted").
		Scan(&held, &lockTimeout); err != nil {
		t.Fatalf("%s: waiter's locks: %v", r.name, err)
	}
	if lockTimeout != "0" {
		t.Fatalf("%s: the slice left lock_timeout = %s on its session", r.name, lockTimeout)
	}
	if says >= 0 && (says > 0) != (held > 0) {
		t.Fatalf("%s: the check after a slice that ran out says %d, and the session holds %d locks", r.name, says, held)
	}
	switch {
	case err != nil && held > 0:
		r.leaked++
	case err == nil && held != 1:
		t.Fatalf("%s: a slice that took the key left %d advisory locks on its session; want 1", r.name, held)
	}
	if held > 0 {
		if _, err := r.waiter.ExecContext(ctx, "SELECT pg_catalog.pg_advisory_unlock_all()"); err != nil {
			t.Fatalf("%s: waiter release: %v", r.name, err)
		}
	}
}

func TestSliceRunOutRaceIntegration(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the race runs thousands of slices")
	}
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		form := sqltext.Inline
		if tg.Driver != pgtest.DriverPQ {
			form = sqltext.Params
		}
		keys := newPGKeys()
		key, key2 := sqltext.KeyOf(keys.next()).Bigint, sqltext.KeyOf(keys.next()).Bigint
		conn := func() *sql.Conn { return pgtest.Conn(t, tg.DB) }
		key3 := sqltext.KeyOf(keys.next()).Bigint
		racers := []*sliceRacer{
			{name: "slice", key: key, holder: conn(), waiter: conn(),
				slice: sqltext.SessionSliceStmt(form, sqltext.Guarded, false, raceSliceMS, 0, sqltext.Key{Bigint: key})},
			{name: "direct", key: key3, holder: conn(), waiter: conn(),
				slice: sqltext.DirectSliceStmt(form, sqltext.Guarded, false, raceSliceMS, sqltext.Key{Bigint: key3}),
				check: sqltext.HeldHere(form, false, sqltext.Key{Bigint: key3})},
			{name: "control", key: key2, holder: conn(), waiter: conn(),
				slice: sqltext.Plain("SELECT pg_catalog.set_config('lock_timeout', '" + strconv.Itoa(raceSliceMS) + "', true), " +
					"pg_catalog.pg_advisory_xact_lock(" + strconv.FormatInt(key2, 10) + "), " +
					"pg_catalog.pg_advisory_lock(" + strconv.FormatInt(key2, 10) + ")")},
		}
		for _, r := range racers {
			r.delay = raceSliceMS * time.Millisecond
		}
		for range raceRounds {
			for _, r := range racers {
				r.round(t)
			}
		}
		for _, r := range racers {
			t.Logf("%s: %d of %d slices ran out, %d of them left a lock held", r.name, r.ranOut, raceRounds, r.leaked)
		}
		// The direct slice's lock, granted as its lock_timeout fired,
		// stays with the failed statement: the check after it found each
		// one (the round fails otherwise), and the wait takes it as its
		// lock.
		if r := racers[0]; r.leaked > 0 {
			t.Errorf("%d of the library's %d slices that ran out left a lock held; want none", r.leaked, r.ranOut)
		}
	})
}

package semaphore_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/semaphore"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// slotOrder returns the slots of s from slot start on, as a try orders
// them.
func slotOrder(s *semaphore.Semaphore, start int) []sqltext.Key {
	order := make([]sqltext.Key, s.N())
	for i := range order {
		order[i] = sqltext.KeyOf(s.Slot((start + i) % s.N()))
	}
	return order
}

// take runs a semaphore statement on conn and returns its answer.
func take(t *testing.T, conn *sql.Conn, stmt sqltext.Stmt, wait bool) int64 {
	t.Helper()
	var o int64
	var err error
	if wait {
		var restored string
		err = conn.QueryRowContext(context.Background(), stmt.Query, stmt.Args...).Scan(&restored, &o)
	} else {
		err = conn.QueryRowContext(context.Background(), stmt.Query, stmt.Args...).Scan(&o)
	}
	if err != nil {
		t.Fatalf("take: %v", err)
	}
	return o
}

// unlocks counts how often conn's session can unlock key: how many times
// it held it.
func unlocks(t *testing.T, conn *sql.Conn, key advisory.Key) int {
	t.Helper()
	n := 0
	for ; n < 5; n++ {
		// One row when the session held key, none otherwise.
		res, err := conn.ExecContext(context.Background(), sqltext.Unlock(false, sqltext.KeyOf(key)))
		if err != nil {
			t.Fatal(err)
		}
		if rows, err := res.RowsAffected(); err != nil || rows != 1 {
			break
		}
	}
	return n
}

// TestWaitTakesOnceWhatACancelLeft: a cancel that lands on a wait after
// the server granted its session lock leaves the session holding the
// slot. The next waiting statement releases it before it tries every
// slot, so that it takes the slot once, not twice: a lease's one unlock
// then frees it. Both forms of the statement, and the slot first or last
// in the order of the try.
func TestWaitTakesOnceWhatACancelLeft(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		s := semaphore.New(tg.DB, randomBase(), 3)
		holder := pgtest.Conn(t, tg.DB)
		if err := advisory.LockKeys(ctx, holder, s.Slot(1), s.Slot(2)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { scope.Discard(holder) })
		waiter := pgtest.Conn(t, tg.DB)
		for _, f := range []sqltext.Form{sqltext.Inline, sqltext.Params} {
			// What the cancelled wait left: slot 0, held once.
			if err := advisory.Lock(ctx, waiter, s.Slot(0)); err != nil {
				t.Fatal(err)
			}
			if o := take(t, waiter, sqltext.SlotWait(f, slotOrder(s, 0), 50), true); o != 1 {
				t.Fatalf("form %d: took place %d; want 1, slot 0", f, o)
			}
			if n := unlocks(t, waiter, s.Slot(0)); n != 1 {
				t.Errorf("form %d: the session held slot 0 %d times; want once", f, n)
			}
		}
		// Tried from slot 1 on, slot 0 comes last, after the two held
		// elsewhere.
		if err := advisory.Lock(ctx, waiter, s.Slot(0)); err != nil {
			t.Fatal(err)
		}
		if o := take(t, waiter, sqltext.SlotWait(sqltext.Inline, slotOrder(s, 1), 50), true); o != 3 {
			t.Fatalf("took place %d; want 3, slot 0", o)
		}
		if n := unlocks(t, waiter, s.Slot(0)); n != 1 {
			t.Errorf("the session held slot 0 %d times; want once", n)
		}
	})
}

// TestSlotStatementsRefuseAMarkedSession: the try and the wait take
// nothing on a session that bears a lease's mark, and say so; a session
// that never had a mark, and one whose mark was cleared, take a slot.
func TestSlotStatementsRefuseAMarkedSession(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		s := semaphore.New(tg.DB, randomBase(), 2)
		conn := pgtest.Conn(t, tg.DB)
		t.Cleanup(func() { scope.Discard(conn) })
		for _, f := range []sqltext.Form{sqltext.Inline, sqltext.Params} {
			for _, wait := range []bool{false, true} {
				stmt := sqltext.SlotTry(f, slotOrder(s, 0))
				if wait {
					stmt = sqltext.SlotWait(f, slotOrder(s, 0), 50)
				}
				pgtest.Exec(t, conn, "SELECT pg_catalog.set_config('pgadvisory.lease', '42', false)")
				if o := take(t, conn, stmt, wait); o != sqltext.SlotShared {
					t.Errorf("form %d, wait %v: a marked session answered %d; want %d", f, wait, o, sqltext.SlotShared)
				}
				for i := range s.N() {
					if locks, err := pgtest.LocksOf(context.Background(), tg.DB, s.Slot(i)); err != nil || len(locks) > 0 {
						t.Errorf("form %d, wait %v: slot %d after a refusal: %v %v", f, wait, i, locks, err)
					}
				}
				pgtest.Exec(t, conn, "SELECT pg_catalog.set_config('pgadvisory.lease', '', false)")
				if o := take(t, conn, stmt, wait); o != 1 {
					t.Errorf("form %d, wait %v: a cleared session answered %d; want 1", f, wait, o)
				}
				if n := unlocks(t, conn, s.Slot(0)); n != 1 {
					t.Errorf("form %d, wait %v: slot 0 held %d times; want once", f, wait, n)
				}
			}
		}
		fresh := pgtest.Conn(t, tg.DB)
		t.Cleanup(func() { scope.Discard(fresh) })
		if o := take(t, fresh, sqltext.SlotWait(sqltext.Inline, slotOrder(s, 1), 50), true); o != 1 {
			t.Errorf("a session that never had a mark answered %d; want 1", o)
		}
	})
}

// TestWaitUnderStatementTimeout: on sessions whose statement_timeout is
// 300 ms, a waiter's statements each end before it, so none is cancelled
// (SQLSTATE 57014, which would read as a wake), and a slot that frees
// with no ring, by plain SQL, is taken by the waiter's next statement.
func TestWaitUnderStatementTimeout(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		db := tg.Server.Open(t, tg.Driver)
		db.SetMaxOpenConns(1) // one session, whose statement_timeout is set
		pgtest.Exec(t, db, "SET statement_timeout = 300")
		var cancelled, tries atomic.Int64
		s := semaphore.New(db, randomBase(), 2, semaphore.Trace(func(ev string) {
			if strings.HasPrefix(ev, "tried") {
				tries.Add(1)
				if strings.Contains(ev, "57014") {
					cancelled.Add(1)
				}
			}
		}))
		holder := pgtest.Conn(t, tg.DB)
		if err := advisory.LockKeys(ctx, holder, s.Slot(0), s.Slot(1)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { scope.Discard(holder) })
		got := make(chan acquired, 1)
		go func() {
			l, err := s.Acquire(ctx)
			got <- acquired{l, err, time.Now()}
		}()
		// Several statements of the wait, each of which would be
		// cancelled if it outlasted statement_timeout.
		const several = 4
		pgtest.Await(t, fmt.Sprintf("%d statements of the wait", several), func() (bool, error) {
			return tries.Load() >= several, nil
		})
		select {
		case r := <-got:
			t.Fatalf("Acquire returned while every slot was held: %v", r.err)
		default:
		}
		if err := advisory.Unlock(ctx, holder, s.Slot(1)); err != nil {
			t.Fatal(err)
		}
		freed := time.Now()
		r := <-got
		if r.err != nil {
			t.Fatalf("Acquire: %v", r.err)
		}
		if r.l.Key() != s.Slot(1) {
			t.Errorf("took %v; want the freed slot %v", r.l.Key(), s.Slot(1))
		}
		t.Logf("took the slot %v after it freed, after %d statements", r.at.Sub(freed).Round(time.Millisecond), tries.Load())
		if n := cancelled.Load(); n > 0 {
			t.Errorf("%d of %d statements were cancelled", n, tries.Load())
		}
		if err := r.l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

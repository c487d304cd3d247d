package semaphore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/semaphore"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// A waker holds every slot of a semaphore as leases and runs rounds in
// which waiters wait, then one slot is released.
type waker struct {
	db      *sql.DB
	s       *semaphore.Semaphore
	leases  map[advisory.Key]*advisory.Lease
	ctx     context.Context    // the waiters'
	stop    context.CancelFunc // ends the waiters' Acquire
	waiters int                // Acquire calls under way
	got     chan acquired      // their results
	rounds  int                // rounds run, each with one release
	rung    int                // rounds whose waiter a ring woke, seen in the trace
	woken   atomic.Int64       // waiters the rings woke
	rings   atomic.Int64
	failed  atomic.Int64 // rings that failed

	slow []string // the steps of rounds slower than slowWake

	traceMu sync.Mutex
	trace   []traced // the semaphore's steps since the round began
}

// traced is a step of the semaphore's, and when it came.
type traced struct {
	at    time.Time
	event string
}

// steps returns the steps since the round began, each timed from the
// release at released.
func (w *waker) steps(released time.Time) string {
	w.traceMu.Lock()
	defer w.traceMu.Unlock()
	var b strings.Builder
	for _, t := range w.trace {
		fmt.Fprintf(&b, " %+.2fms %s;", float64(t.at.Sub(released))/float64(time.Millisecond), t.event)
	}
	return b.String()
}

// acquired is what an Acquire returned, and when.
type acquired struct {
	l   *advisory.Lease
	err error
	at  time.Time
}

// newWaker returns a waker on a semaphore of n slots, every one held.
func newWaker(ctx context.Context, db *sql.DB, n int) (*waker, error) {
	w := &waker{db: db, leases: map[advisory.Key]*advisory.Lease{}, got: make(chan acquired, 64)}
	w.ctx, w.stop = context.WithCancel(ctx)
	w.s = semaphore.New(db, randomBase(), n, semaphore.Rang(func(n int64, err error) {
		w.rings.Add(1)
		w.woken.Add(n)
		if err != nil {
			w.failed.Add(1)
		}
	}), semaphore.Trace(func(ev string) {
		w.traceMu.Lock()
		w.trace = append(w.trace, traced{time.Now(), ev})
		w.traceMu.Unlock()
	}))
	for range n {
		l, err := w.s.TryAcquire(ctx)
		if err != nil {
			w.close(ctx)
			return nil, err
		}
		w.leases[l.Key()] = l
	}
	return w, nil
}

// settle waits, for up to 2 s, until every round's release has rung, and
// returns the number of waiters the rings woke.
func (w *waker) settle() int64 {
	for deadline := time.Now().Add(2 * time.Second); w.rings.Load() < int64(w.rounds) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	return w.woken.Load()
}

// close ends the waiters and releases every lease the waker holds.
func (w *waker) close(ctx context.Context) {
	w.stop()
	for ; w.waiters > 0; w.waiters-- {
		if r := <-w.got; r.l != nil {
			w.leases[r.l.Key()] = r.l
		}
	}
	for k, l := range w.leases {
		_ = l.Release(ctx)
		delete(w.leases, k)
	}
}

// waitingQuery returns the slots, from 0, that sessions wait for among
// the $3 pairs ($1, $2+i) in the current database.
const waitingQuery = `SELECT DISTINCT (objid::bigint - $2) & 4294967295 FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND classid::bigint = $1 AND objsubid = 2 AND (objid::bigint - $2) & 4294967295 < $3`

// waitingSlots returns the slots of s, whose base is a pair, that
// sessions wait for: one query.
func waitingSlots(ctx context.Context, db *sql.DB, s *semaphore.Semaphore) (map[advisory.Key]bool, error) {
	a, b, _ := s.Slot(0).Pair()
	rows, err := db.QueryContext(ctx, waitingQuery, int64(uint32(a)), int64(uint32(b)), s.N())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	on := map[advisory.Key]bool{}
	for rows.Next() {
		var i int
		if err := rows.Scan(&i); err != nil {
			return nil, err
		}
		on[s.Slot(i)] = true
	}
	return on, rows.Err()
}

// awaitWaiting returns the slots the waiters wait for once one waits,
// polling every 5 ms, or an error when an Acquire returns first.
func (w *waker) awaitWaiting(ctx context.Context) (map[advisory.Key]bool, error) {
	for {
		on, err := waitingSlots(ctx, w.db, w.s)
		if err != nil || len(on) > 0 {
			return on, err
		}
		select {
		case r := <-w.got:
			w.waiters--
			if r.l != nil {
				w.leases[r.l.Key()] = r.l
			}
			return nil, fmt.Errorf("Acquire returned before any slot freed: %v", r.err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// round keeps k waiters waiting, lets them wait for at least waited, then
// releases a slot that one waits on (queued) or that none does (lone), and
// returns the time from Release returning to the first waiter's Acquire
// returning. That waiter's lease then holds the freed slot; the others
// wait on.
func (w *waker) round(ctx context.Context, waited time.Duration, queued bool, k int) (time.Duration, error) {
	start := time.Now()
	for ; w.waiters < k; w.waiters++ {
		go func() {
			l, err := w.s.Acquire(w.ctx)
			w.got <- acquired{l, err, time.Now()}
		}()
	}
	time.Sleep(time.Until(start.Add(waited)))
	w.traceMu.Lock()
	w.trace = w.trace[:0]
	w.traceMu.Unlock()
	// A waiter moves to another slot at each recheck: look when the time
	// has come.
	on, err := w.awaitWaiting(ctx)
	if err != nil {
		return 0, err
	}
	var free advisory.Key
	found := false
	for key := range w.leases {
		if on[key] == queued {
			free, found = key, true
			break
		}
	}
	if !found {
		return 0, fmt.Errorf("no slot to free: waiters on %v", on)
	}
	if err := w.leases[free].Release(ctx); err != nil {
		return 0, fmt.Errorf("Release: %w", err)
	}
	released := time.Now()
	w.rounds++
	delete(w.leases, free)
	select {
	case r := <-w.got:
		w.waiters--
		if r.err != nil {
			return 0, fmt.Errorf("Acquire: %w", r.err)
		}
		w.leases[r.l.Key()] = r.l
		if r.l.Key() != free {
			return 0, fmt.Errorf("a waiter took slot %v; slot %v was the free one", r.l.Key(), free)
		}
		if w.wokenSince(released) {
			w.rung++
		}
		if d := r.at.Sub(released); d > slowWake && slowWake > 0 {
			w.slow = append(w.slow, fmt.Sprintf("%.2fms:%s", float64(d)/float64(time.Millisecond), w.steps(released)))
		}
		return r.at.Sub(released), nil
	case <-time.After(10 * time.Second):
		return 0, fmt.Errorf("no waiter, on slots %v, entered 10 s after slot %v freed", on, free)
	}
}

// wokenSince reports whether the semaphore's trace shows, after t, a try
// that a ring ended (the server cancelled its wait), rather than one whose
// wait ran out at its recheck.
func (w *waker) wokenSince(t time.Time) bool {
	w.traceMu.Lock()
	defer w.traceMu.Unlock()
	for _, ev := range w.trace {
		if ev.at.After(t) && strings.HasPrefix(ev.event, "tried: ") && strings.Contains(ev.event, "the server cancelled the statement") {
			return true
		}
	}
	return false
}

// slowWake is the wake after which a round's steps are kept, for the
// benchmark to log; PGADVISORY_SLOW_WAKE sets it (a duration), and none are
// kept without it.
var slowWake, _ = time.ParseDuration(os.Getenv("PGADVISORY_SLOW_WAKE"))

// percentile returns the p-th percentile of sorted d.
func percentile(d []time.Duration, p int) time.Duration {
	return d[min(len(d)*p/100, len(d)-1)]
}

// TestLoneWaiterWakes: a waiter alone on a semaphore whose 3 slots are all
// held waits 2.5 s, then a slot frees that it does not wait on; it must
// take that slot at once, not at its next recheck. (Half a recheck past
// the second, so that the slot frees while the waiter waits rather than
// as it tries every slot again.) Ten semaphores at a time, two rounds
// each. It checks that rings wake lone waiters, in the semaphore's trace,
// not how fast or how often: a ring that reads pg_locks between a
// waiter's try and its wait misses it, which a loaded machine makes
// frequent, and the waiter then takes the slot at its recheck.
// BenchmarkWake measures how fast. At the end no
// lock is left on any slot, by the waiters that rings cancelled either.
func TestLoneWaiterWakes(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		const sems, rounds, waited = 10, 2, 2500 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var (
			mu     sync.Mutex
			wakes  []time.Duration
			wakers []*waker
			wg     sync.WaitGroup
		)
		for i := range sems {
			wg.Go(func() {
				// Spread the semaphores over one recheck.
				time.Sleep(time.Duration(i) * time.Second / sems)
				w, err := newWaker(ctx, tg.DB, 3)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				wakers = append(wakers, w)
				mu.Unlock()
				for range rounds {
					d, err := w.round(ctx, waited, false, 1)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					wakes = append(wakes, d)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		var woken, rings, failed int64
		for _, w := range wakers {
			woken += w.settle()
			rings += w.rings.Load()
			w.close(ctx)
			for i := range w.s.N() {
				pgtest.AwaitFree(t, tg.DB, w.s.Slot(i))
			}
			failed += w.failed.Load()
		}
		if failed != 0 {
			t.Errorf("%d of %d rings failed", failed, rings)
		}
		if woken == 0 {
			t.Error("no ring woke a waiter")
		}
		if len(wakes) == 0 {
			t.Fatal("no wake measured")
		}
		slices.Sort(wakes)
		t.Logf("%d lone waiters woken after %v of waiting: p50 %v, p99 %v, max %v; %d rings woke %d waiters",
			len(wakes), waited, percentile(wakes, 50).Round(10*time.Microsecond),
			percentile(wakes, 99).Round(10*time.Microsecond), wakes[len(wakes)-1].Round(10*time.Microsecond), rings, woken)
		rung := 0
		for _, w := range wakers {
			rung += w.rung
		}
		t.Logf("a ring woke the lone waiter in %d of %d rounds; the others took the slot at their recheck", rung, len(wakes))
		if rung == 0 {
			t.Errorf("no ring woke a lone waiter in %d rounds: each took its slot only at its recheck", len(wakes))
		}
	})
}

// A waiter is a session that waits for a key with pg_advisory_lock, and
// reports how its statement ended.
type waiter struct {
	name string
	done chan error
}

// startWaiter starts a session of db that waits for key, and waits until
// look's pg_locks shows it waiting. Its session is discarded when the wait
// ends; t's cleanup ends a wait still going.
func startWaiter(t *testing.T, db, look *sql.DB, name string, key advisory.Key) *waiter {
	t.Helper()
	conn := pgtest.Conn(t, db)
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	t.Cleanup(func() { cancel(); <-ended }) // before conn's close
	w := &waiter{name: name, done: make(chan error, 1)}
	stmt := sqltext.Lock(false, false, sqltext.KeyOf(key))
	go func() {
		defer close(ended)
		_, err := conn.ExecContext(ctx, stmt)
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		w.done <- err
	}()
	pgtest.AwaitWaiting(t, look, key)
	return w
}

// cancelled reports whether the waiter's statement was cancelled (57014)
// within d, and fails t if it ended otherwise.
func (w *waiter) cancelled(t *testing.T, d time.Duration) bool {
	t.Helper()
	select {
	case err := <-w.done:
		if scope.SQLState(err) != "57014" {
			t.Errorf("%s: wait ended with %v; want SQLSTATE 57014", w.name, err)
		}
		return true
	case <-time.After(d):
		return false
	}
}

// ring runs the semaphore's ring statement for n slots from base on db
// and returns the number of waiters it woke.
func ring(t *testing.T, db *sql.DB, base advisory.Key, n int) int64 {
	t.Helper()
	stmt := sqltext.SlotRing(scope.DBForm(db), sqltext.KeyOf(base), n)
	var woken int64
	if err := db.QueryRowContext(context.Background(), stmt.Query, stmt.Args...).Scan(&woken); err != nil {
		t.Fatalf("ring: %v", err)
	}
	return woken
}

// TestRingWakesItsWaiters checks, for semaphores of 4 slots whose keys
// cross a boundary (a bigint range over two values of classid, ranges of
// negative bigints, a pair's second integer wrapping around), that the
// ring wakes as many waiters as slots are free, the longest waiting first,
// and no session that waits for a key outside the slots: just before or
// after them, or the same numbers in the other key space.
func TestRingWakesItsWaiters(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		hi := int64(0x5e3a<<16 | rand.N(1<<16))
		a := int32(0x5e3b<<16 | rand.N(1<<15))
		bases := []advisory.Key{
			advisory.Int64Key(hi<<32 | 0xfffffffe),                  // slots cross classid hi to hi+1
			advisory.Int64Key(-2 - (hi << 20)),                      // negative, down to
			advisory.Int64Key(-2),                                   // -2..1, across zero
			advisory.PairKey(a, math.MaxInt32-1),                    // wraps to MinInt32
			advisory.PairKey(-a, int32(rand.Int32N(1<<30)+(1<<30))), // a negative first integer
		}
		for _, base := range bases {
			t.Run(base.String(), func(t *testing.T) {
				s := semaphore.New(tg.DB, base, 4)
				// The other key space's key with the same numbers as k.
				other := func(k advisory.Key) advisory.Key {
					if x, y, ok := k.Pair(); ok {
						return advisory.Int64Key(int64(uint32(x))<<32 | int64(uint32(y)))
					}
					v, _ := k.Int64()
					return advisory.PairKey(int32(uint64(v)>>32), int32(uint32(v)))
				}
				before, after := s.Slot(-1), s.Slot(4)
				// Slots 0, 2 and 3 are held, slot 1 is free; the keys
				// around them are held as well.
				held := []advisory.Key{s.Slot(0), s.Slot(2), s.Slot(3), before, after, other(s.Slot(2))}
				holder := pgtest.Conn(t, tg.DB)
				if err := advisory.LockKeys(context.Background(), holder, held...); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = holder.Raw(func(any) error { return driver.ErrBadConn }) })
				outside := []*waiter{
					startWaiter(t, tg.DB, tg.DB, "before", before),
					startWaiter(t, tg.DB, tg.DB, "after", after),
					startWaiter(t, tg.DB, tg.DB, "other key space", other(s.Slot(2))),
				}
				first := startWaiter(t, tg.DB, tg.DB, "first on slot 3", s.Slot(3))
				second := startWaiter(t, tg.DB, tg.DB, "second on slot 2", s.Slot(2))

				if n := ring(t, tg.DB, base, 4); n != 1 {
					t.Errorf("first ring woke %d; want 1", n)
				}
				if !first.cancelled(t, 10*time.Second) {
					t.Fatal("the first waiter was not woken")
				}
				if second.cancelled(t, 100*time.Millisecond) {
					t.Error("one slot was free, and the ring woke two waiters")
				}
				// Slot 1 is still free: the next ring wakes the next.
				if n := ring(t, tg.DB, base, 4); n != 1 {
					t.Errorf("second ring woke %d; want 1", n)
				}
				if !second.cancelled(t, 10*time.Second) {
					t.Fatal("the second waiter was not woken")
				}
				if n := ring(t, tg.DB, base, 4); n != 0 {
					t.Errorf("third ring woke %d; want 0: nobody waits for a slot", n)
				}
				for _, w := range outside {
					if w.cancelled(t, 0) {
						t.Errorf("%s: a waiter for a key outside the slots was woken", w.name)
					}
				}
				// Every slot held: a ring wakes nobody.
				if err := advisory.Lock(context.Background(), holder, s.Slot(1)); err != nil {
					t.Fatal(err)
				}
				third := startWaiter(t, tg.DB, tg.DB, "third on slot 1", s.Slot(1))
				if n := ring(t, tg.DB, base, 4); n != 0 {
					t.Errorf("ring with every slot held woke %d; want 0", n)
				}
				_ = holder.Raw(func(any) error { return driver.ErrBadConn })
				for _, w := range append(outside, third) {
					select {
					case err := <-w.done:
						if err != nil {
							t.Errorf("%s: %v; want the lock, once the holder ended", w.name, err)
						}
					case <-time.After(10 * time.Second):
						t.Errorf("%s: still waiting 10 s after the holder ended", w.name)
					}
				}
				for _, k := range append(held, s.Slot(1)) {
					pgtest.AwaitFree(t, tg.DB, k)
				}
			})
		}
	})
}

// TestRingSkipsWhomItMayNotSignal: a ring run by a role that is no
// superuser wakes the waiter of its own role, and neither fails nor wakes
// the waiters it may not signal, which wait longer: a superuser's,
// another role's, and that of a superuser role the ringer is a member of.
// The ringer may read every session's wait (pg_read_all_stats), so that
// what it may signal decides, not what it may see.
func TestRingSkipsWhomItMayNotSignal(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		var dbs [3]*sql.DB // the ringer's role, another role, a superuser role
		var roles [3]string
		for i, r := range []struct{ prefix, attrs string }{
			{"pgadvisory_ringer_", "LOGIN"}, {"pgadvisory_other_", "LOGIN"}, {"pgadvisory_admin_", "LOGIN SUPERUSER"},
		} {
			role := pgtest.UniqueName(r.prefix)
			roles[i] = role
			pgtest.Exec(t, tg.DB, "CREATE ROLE "+role+" "+r.attrs)
			t.Cleanup(func() {
				if _, err := tg.DB.ExecContext(ctx, "DROP ROLE IF EXISTS "+role); err != nil {
					t.Errorf("DROP ROLE: %v", err)
				}
			})
			dbs[i] = tg.Server.WithDSN(t, func(u *url.URL) { u.User = url.User(role) }).Open(t, tg.Driver)
		}
		pgtest.Exec(t, tg.DB, "GRANT pg_read_all_stats, "+roles[2]+" TO "+roles[0])
		ringer, otherDB, adminDB := dbs[0], dbs[1], dbs[2]
		base := randomBase()
		s := semaphore.New(tg.DB, base, 3)
		holder := pgtest.Conn(t, tg.DB)
		if err := advisory.LockKeys(ctx, holder, s.Slot(0), s.Slot(1)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = holder.Raw(func(any) error { return driver.ErrBadConn }) })
		superuser := startWaiter(t, tg.DB, tg.DB, "superuser", s.Slot(0))
		other := startWaiter(t, otherDB, tg.DB, "other role", s.Slot(1))
		admin := startWaiter(t, adminDB, tg.DB, "superuser role the ringer is a member of", s.Slot(1))
		own := startWaiter(t, ringer, tg.DB, "ringer's role", s.Slot(0))
		if n := ring(t, ringer, base, 3); n != 1 {
			t.Errorf("ring woke %d; want 1", n)
		}
		if !own.cancelled(t, 10*time.Second) {
			t.Error("the waiter of the ringer's role was not woken")
		}
		for _, w := range []*waiter{superuser, other, admin} {
			if w.cancelled(t, 100*time.Millisecond) {
				t.Errorf("%s: woken by a role that may not signal it", w.name)
			}
		}
		_ = holder.Raw(func(any) error { return driver.ErrBadConn })
		for _, w := range []*waiter{superuser, other, admin} {
			select {
			case <-w.done:
			case <-time.After(10 * time.Second):
				t.Errorf("%s: still waiting 10 s after the holder ended", w.name)
			}
		}
		for i := range s.N() {
			pgtest.AwaitFree(t, tg.DB, s.Slot(i))
		}
		for _, db := range dbs {
			_ = db.Close() // before the roles are dropped
		}
	})
}

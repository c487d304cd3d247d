package semaphore_test

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/semaphore"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// randomBase returns a base key whose slots no other test uses.
func randomBase() advisory.Key { return advisory.PairKey(0x5e3a, rand.Int32()&^0xffff) }

// heldSlots counts the granted locks on s's slots, per backend.
func heldSlots(t *testing.T, db *sql.DB, s *semaphore.Semaphore) map[int]int {
	t.Helper()
	held := map[int]int{}
	for i := range s.N() {
		locks, err := pgtest.LocksOf(context.Background(), db, s.Slot(i))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range locks {
			if l.Granted {
				held[l.PID]++
			}
		}
	}
	return held
}

// holderPID returns the backend that holds l's slot.
func holderPID(t *testing.T, db *sql.DB, key advisory.Key) int {
	locks, err := pgtest.LocksOf(context.Background(), db, key)
	if err != nil {
		t.Error(err)
		return 0
	}
	for _, l := range locks {
		if l.Granted {
			return l.PID
		}
	}
	return 0
}

// TestTryTakesOneLock checks, in pg_locks, that one try over every slot
// takes exactly one lock, whichever slots are taken already, and none when
// all are.
func TestTryTakesOneLock(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		s := semaphore.New(tg.DB, randomBase(), 4)
		var leases []*advisory.Lease
		defer func() {
			for _, l := range leases {
				_ = l.Release(ctx)
			}
		}()
		for i := range s.N() {
			l, err := s.TryAcquire(ctx)
			if err != nil {
				t.Fatalf("try %d: %v", i, err)
			}
			leases = append(leases, l)
			held := heldSlots(t, tg.DB, s)
			if len(held) != i+1 {
				t.Fatalf("after %d tries, %d backends hold slots: %v", i+1, len(held), held)
			}
			for pid, n := range held {
				if n != 1 {
					t.Fatalf("backend %d holds %d slots", pid, n)
				}
			}
		}
		if _, err := s.TryAcquire(ctx); !errors.Is(err, advisory.ErrNotAcquired) {
			t.Fatalf("TryAcquire when full = %v; want ErrNotAcquired", err)
		}
		if held := heldSlots(t, tg.DB, s); len(held) != s.N() {
			t.Fatalf("after a failed try: %v", held)
		}
		// A waiter enters when a slot frees.
		got := make(chan *advisory.Lease, 1)
		go func() {
			l, err := s.Acquire(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		// The waiter waits on one slot, in the server.
		pgtest.Await(t, "the waiter to wait on a slot", func() (bool, error) {
			for i := range s.N() {
				locks, err := pgtest.LocksOf(ctx, tg.DB, s.Slot(i))
				if err != nil {
					return false, err
				}
				for _, l := range locks {
					if !l.Granted {
						return true, nil
					}
				}
			}
			return false, nil
		})
		freed := time.Now()
		if err := leases[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case l := <-got:
			t.Logf("a waiter entered %v after a slot freed", time.Since(freed))
			if l != nil {
				leases[0] = l
			}
		case <-time.After(10 * time.Second):
			t.Fatal("waiter did not enter")
		}
	})
}

// acquisitions returns the proof's number of acquisitions per target:
// 1,000 by default, PGADVISORY_RECIPE_ACQUISITIONS when set (10000 for
// docs/recipes.md).
func acquisitions(t *testing.T) int {
	if v := os.Getenv("PGADVISORY_RECIPE_ACQUISITIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PGADVISORY_RECIPE_ACQUISITIONS=%q: want a positive number", v)
		}
		return n
	}
	return 1000
}

// TestProof: 32 workers, 4 slots, many acquisitions with random
// cancellations and backend terminations. Never more than 4 inside, by
// an in-process count of live leases and by pg_locks; no slot held at the
// end; the time from a slot freeing to a waiter entering, measured.
func TestProof(t *testing.T) {
	total := acquisitions(t)
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		// Not parallel: 32 workers are enough for the machine.
		const workers, n = 32, 4
		ctx := context.Background()
		var rings, woken, ringErrs atomic.Int64
		s := semaphore.New(tg.DB, randomBase(), n, semaphore.Heartbeat(100*time.Millisecond),
			semaphore.Rang(func(n int64, err error) {
				rings.Add(1)
				woken.Add(n)
				if err != nil {
					ringErrs.Add(1)
				}
			}))
		slot := map[advisory.Key]int{}
		for i := range n {
			slot[s.Slot(i)] = i
		}
		var (
			done, cancelled, terminated atomic.Int64
			inside, violations          atomic.Int64
			freed                       [n]atomic.Int64 // when each slot was last released, in ns
			mu                          sync.Mutex
			wakes                       []time.Duration
		)

		// The database's view: granted locks on the slots.
		stopMon := make(chan struct{})
		var dbViolations, dbChecks, dbMax atomic.Int64
		var mon sync.WaitGroup
		mon.Go(func() {
			for {
				select {
				case <-stopMon:
					return
				case <-time.After(2 * time.Millisecond):
				}
				held := 0
				for _, c := range heldSlots(t, tg.DB, s) {
					held += c
				}
				dbChecks.Add(1)
				if int64(held) > dbMax.Load() {
					dbMax.Store(int64(held))
				}
				if held > n {
					dbViolations.Add(1)
				}
			}
		})

		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for done.Load() < int64(total) && !t.Failed() {
					actx, cancel := context.WithTimeout(ctx, 30*time.Second)
					if rand.N(10) == 0 { // a random cancellation, mostly while waiting
						cancel()
						actx, cancel = context.WithTimeout(ctx, time.Duration(rand.N(5000))*time.Microsecond)
					}
					began := time.Now()
					l, err := s.Acquire(actx)
					deadline, _ := actx.Deadline()
					cancel()
					if err != nil {
						// pgx's dial may time out a moment before
						// ctx's own timer fires: the error is then
						// the dial's.
						// Another worker may end this session while it
						// starts its lease (see the termination below).
						if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || !time.Now().Before(deadline) ||
							pgSQLState(err) == "57P01" {
							cancelled.Add(1)
							continue
						}
						t.Errorf("Acquire: %v", err)
						return
					}
					entered := time.Now()
					if inside.Add(1) > n {
						violations.Add(1)
					}
					i := slot[l.Key()]
					if f := freed[i].Load(); f > began.UnixNano() {
						// The slot freed while this worker waited.
						mu.Lock()
						wakes = append(wakes, entered.Sub(time.Unix(0, f)))
						mu.Unlock()
					}
					done.Add(1)
					time.Sleep(time.Duration(rand.N(2000)) * time.Microsecond)
					if rand.N(50) == 0 && l.Err() == nil { // the holder's backend is terminated
						inside.Add(-1) // before the slot can free
						pid := holderPID(t, tg.DB, l.Key())
						if _, err := tg.DB.Exec("SELECT pg_terminate_backend($1)", pid); err != nil {
							t.Error(err)
						}
						terminated.Add(1)
						select {
						case <-l.Done():
						case <-time.After(10 * time.Second):
							t.Error("lease not lost 10s after its backend was terminated")
						}
						if err := l.Release(ctx); !errors.Is(err, advisory.ErrLockLost) {
							t.Errorf("Release after termination = %v; want ErrLockLost", err)
						}
						continue
					}
					inside.Add(-1) // before the slot can free
					freed[i].Store(time.Now().UnixNano())
					// On a loaded machine a heartbeat can miss its
					// deadline, and the lease gives itself up: safe, and
					// reported as a loss. A slot that freed so may then go
					// to another worker, which a termination above, meant
					// for this one, can hit.
					if err := l.Release(ctx); err != nil && !errors.Is(err, advisory.ErrLockLost) {
						t.Errorf("Release: %v", err)
					}
				}
			})
		}
		wg.Wait()
		close(stopMon)
		mon.Wait()

		for i := range n {
			pgtest.AwaitFree(t, tg.DB, s.Slot(i))
		}
		if v := violations.Load(); v != 0 {
			t.Errorf("%d times more than %d inside, by the in-process count", v, n)
		}
		if v := dbViolations.Load(); v != 0 {
			t.Errorf("%d times more than %d slots held, by pg_locks", v, n)
		}
		if held := heldSlots(t, tg.DB, s); len(held) != 0 {
			t.Errorf("slots held at the end: %v", held)
		}
		slices.Sort(wakes)
		if len(wakes) == 0 {
			t.Fatal("no waiter entered a freed slot")
		}
		t.Logf("%d acquisitions by %d workers on %d slots: %d cancelled, %d holders' backends terminated; "+
			"in-process violations %d; pg_locks: %d checks, max %d held, %d violations; "+
			"slot freed to waiter entering over %d waits: p50 %v, p99 %v, max %v; %d rings (%d failed) woke %d waiters",
			done.Load(), workers, n, cancelled.Load(), terminated.Load(), violations.Load(),
			dbChecks.Load(), dbMax.Load(), dbViolations.Load(), len(wakes),
			wakes[len(wakes)/2].Round(10*time.Microsecond), wakes[len(wakes)*99/100].Round(10*time.Microsecond),
			wakes[len(wakes)-1].Round(10*time.Microsecond), rings.Load(), ringErrs.Load(), woken.Load())
	})
}

// pgSQLState returns the SQLSTATE in err's tree, or "".
func pgSQLState(err error) string {
	var e interface{ SQLState() string }
	if errors.As(err, &e) {
		return e.SQLState()
	}
	return ""
}

// TestTryStatementPerSemaphore checks that a try costs pgx one prepared
// statement per connection, not one per order of the slots: on a pool of
// one connection, semaphores of either key space go through every
// rotation of their slots, each try taking one slot, and the session then
// holds one statement that tries slots for each key space on pgx, and none
// on lib/pq. The same holds for the statement that rings at each release,
// which runs on the same connection.
func TestTryStatementPerSemaphore(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		tg.DB.SetMaxOpenConns(1)
		// The lease holds the pool's one connection: look from another.
		look := tg.Server.Open(t, pgtest.DriverPQ)
		bigint := advisory.Int64Key(0x5e3a<<32 | int64(rand.Uint32()&^0xffff))
		var rang []chan error // each semaphore's rings
		for _, base := range []advisory.Key{randomBase(), bigint} {
			// Rings coalesce: there may be fewer than releases.
			c := make(chan error, 100)
			rang = append(rang, c)
			s := semaphore.New(tg.DB, base, 5, semaphore.Rang(func(_ int64, err error) { c <- err }))
			for range 2 * s.N() {
				l, err := s.TryAcquire(ctx)
				if err != nil {
					t.Fatalf("%v: TryAcquire: %v", base, err)
				}
				if held := heldSlots(t, look, s); len(held) != 1 {
					t.Fatalf("%v: slots held by %v; want one backend", base, held)
				}
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, c := range rang {
			select {
			case err := <-c:
				if err != nil {
					t.Errorf("ring: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no ring 10 s after the releases")
			}
		}
		conn := pgtest.Conn(t, tg.DB)
		want := 2
		if tg.Driver == pgtest.DriverPQ {
			want = 0
		}
		for _, c := range []struct{ what, like string }{
			{"try slots", "%WITH ORDINALITY%pg_try_advisory_lock%"},
			{"ring", "%pg_cancel_backend%"},
		} {
			var n int
			err := conn.QueryRowContext(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE $1 AND statement NOT LIKE '%pg_prepared_statements%'", c.like).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			if n != want {
				t.Errorf("%d statements that %s are prepared on the session; want %d", n, c.what, want)
			}
		}
	})
}

package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// The proofs of the multiplexed Locker whose connections are terminated
// (the Loss and Chaos subtests of TestLockerIntegration): a terminated
// connection loses exactly its own leases, and a hundred thousand fenced
// acquisitions by two Lockers under terminations accept no stale write.

// lockerLossHeartbeat is the heartbeat of TestLockerIntegration/Loss's
// Locker, whose every heartbeat proves thousands of leases with a read of
// pg_locks: longer than lossHeartbeat, so that under the whole suite's
// load the leases that are not terminated outlive their heartbeats.
const lockerLossHeartbeat = 300 * time.Millisecond

func testLockerLoss(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		app := pgtest.UniqueName("advisory-")
		db := pgtest.OpenApp(t, tg, app)
		lk := newLocker(t, db, advisory.LockerConfig{MaxConns: manyConns, Heartbeat: lockerLossHeartbeat})
		gen := newPGKeys()
		var got detections
		for range leaseRuns(t) {
			ls := map[advisory.Key]*advisory.Lease{}
			for range 100 {
				l, err := lk.Acquire(ctx, gen.next(), advisory.Fencing())
				if err != nil {
					t.Fatal(err)
				}
				ls[l.Key()] = l
			}
			// The leases of one backend, and the others.
			byPID := map[int][]*advisory.Lease{}
			for k, l := range ls {
				pid := pgLeasePID(t, tg.DB, k)
				byPID[pid] = append(byPID[pid], l)
			}
			if len(byPID) != manyConns {
				t.Fatalf("100 leases on %d backends; want %d", len(byPID), manyConns)
			}
			var victim int
			for pid := range byPID {
				victim = pid
				break
			}
			doneAt := map[*advisory.Lease]<-chan time.Time{}
			for _, l := range byPID[victim] {
				doneAt[l] = watchDone(l)
			}
			randomPhase(lockerLossHeartbeat)
			event := time.Now()
			pgtest.Exec(t, tg.DB, "SELECT pg_terminate_backend($1)", victim)
			var slowest time.Duration
			for _, l := range byPID[victim] {
				slowest = max(slowest, awaitLost(t, l, doneAt[l], event, lockerLossHeartbeat))
			}
			got.add(slowest)
			// The others live on, through several heartbeats, and
			// new acquisitions work.
			var others []*advisory.Lease
			for pid, pls := range byPID {
				if pid != victim {
					others = append(others, pls...)
				}
			}
			awaitBeats(t, 3, others...)
			for pid, pls := range byPID {
				if pid == victim {
					continue
				}
				for _, l := range pls {
					if err := l.Err(); err != nil {
						t.Fatalf("a lease on backend %d, not terminated, was lost: %v", pid, err)
					}
				}
			}
			fresh, err := lk.Acquire(ctx, gen.next())
			if err != nil {
				t.Fatalf("Acquire after a connection was lost: %v", err)
			}
			if err := fresh.Release(ctx); err != nil {
				t.Fatal(err)
			}
			for pid, pls := range byPID {
				for _, l := range pls {
					err := l.Release(ctx)
					if lost := pid == victim; lost != errors.Is(err, advisory.ErrLockLost) || !lost && err != nil {
						t.Fatalf("Release of a lease on backend %d (terminated %v): %v", pid, lost, err)
					}
				}
			}
		}
		got.log(t, "pg_terminate_backend of one of 4 connections")
		pgRequireNoAppLocks(t, tg.DB, app)
	})
}

// envLockerOps sets how many acquisitions TestLockerIntegration/Chaos
// makes on each server and driver. The default, 2,000 on each of the four,
// keeps the suite's run short under the race detector;
// PGADVISORY_LOCKER_OPS=100000 makes the full proof that docs/locker.md
// records.
const envLockerOps = "PGADVISORY_LOCKER_OPS"

// lockerOps returns that number.
func lockerOps(t *testing.T) int64 { return int64(envCount(t, envLockerOps, 2_000)) }

// fence is the protected resource of the chaos test: per key, it accepts
// a write only with a token above the last accepted one.
type fence struct {
	mu   sync.Mutex
	last map[advisory.Key]int64
}

func (f *fence) write(k advisory.Key, token int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if token <= f.last[k] {
		return false
	}
	f.last[k] = token
	return true
}

func testLockerChaos(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		app := pgtest.UniqueName("advisory-")
		db := pgtest.OpenApp(t, tg, app)
		// Two Lockers, as two processes would have, compete for the
		// keys: within one, its own arbitration keeps leases apart.
		lockers := []*advisory.Locker{
			newLocker(t, db, advisory.LockerConfig{MaxConns: manyConns, Heartbeat: lossHeartbeat}),
			newLocker(t, db, advisory.LockerConfig{MaxConns: manyConns, Heartbeat: lossHeartbeat}),
		}
		// Connect first: the engine identified, a carrier open in each
		// Locker, the pool warm (see warmPool).
		warmPool(t, db, 8)
		for _, lk := range lockers {
			wctx, cancel := context.WithTimeout(ctx, pgtest.PollTimeout)
			l, err := lk.Acquire(wctx, advisory.Int64Key(mrand.Int64()), advisory.Try())
			cancel()
			if err != nil {
				t.Fatalf("warming the Locker: %v", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		gen := newPGKeys()
		keys := make([]advisory.Key, 1000)
		for i := range keys {
			keys[i] = gen.next()
		}
		ops := lockerOps(t)
		f := &fence{last: map[advisory.Key]int64{}}
		var (
			done                    atomic.Int64
			accepted, refused, lost atomic.Int64
			failed                  atomic.Int64 // acquisitions that failed as allowed
			lastFailure             atomic.Value // the last of them, for a run with nothing to prove
			tokens                  sync.Map     // every token handed out
			inside                  sync.Map     // key → the lease in its critical section
		)
		var overlapped sync.Map // leases another lease found inside
		var wg sync.WaitGroup
		for w := range 32 {
			lk := lockers[w%len(lockers)]
			wg.Go(func() {
				rnd := mrand.New(mrand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
				for done.Add(1) <= ops && !t.Failed() {
					k := keys[rnd.IntN(len(keys))]
					opts := []advisory.LockerOption{advisory.Fencing()}
					if rnd.IntN(4) == 0 {
						opts = append(opts, advisory.Try())
					}
					actx, cancel := context.WithTimeout(ctx, time.Second)
					l, err := lk.Acquire(actx, k, opts...)
					cancel()
					if err != nil {
						// Busy, or the terminations took the
						// connection under the acquisition: nothing is
						// held, and the worker goes on.
						if !errors.Is(err, advisory.ErrNotAcquired) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, advisory.ErrLockLost) && pgSQLState(err) != "57P01" {
							t.Errorf("worker %d: Acquire: %v", w, err)
						}
						failed.Add(1)
						lastFailure.Store(err.Error())
						continue
					}
					if _, dup := tokens.LoadOrStore(l.Token(), true); dup {
						t.Errorf("token %d handed out twice", l.Token())
					}
					if prev, ok := inside.Swap(k, l); ok && prev != nil {
						overlapped.Store(prev, true)
					}
					// Work that takes a moment, so that the
					// terminations land inside critical sections.
					time.Sleep(time.Duration(rnd.IntN(2000)) * time.Microsecond)
					ok := f.write(k, l.Token())
					if !ok {
						// A later holder wrote first: this lease must
						// learn that it was lost.
						select {
						case <-l.Done():
						case <-time.After(leaseBound(lossHeartbeat)):
							t.Errorf("write with token %d refused, but the lease is not lost", l.Token())
						}
						if !errors.Is(l.Err(), advisory.ErrLockLost) {
							t.Errorf("write with token %d refused; Err = %v, want ErrLockLost", l.Token(), l.Err())
						}
						refused.Add(1)
					} else {
						accepted.Add(1)
					}
					inside.CompareAndSwap(k, l, nil)
					if err := l.Release(ctx); errors.Is(err, advisory.ErrLockLost) {
						lost.Add(1)
					} else if err != nil {
						t.Errorf("worker %d: Release: %v", w, err)
					}
				}
			})
		}
		// Terminate one of the Lockers' backends every 100–300 ms.
		var terminated int
		stop := make(chan struct{})
		chaosDone := make(chan struct{})
		go func() {
			defer close(chaosDone)
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(100+mrand.IntN(200)) * time.Millisecond):
				}
				if chaosTerminate(t, tg.DB, app) {
					terminated++
				}
			}
		}()
		wg.Wait()
		close(stop)
		<-chaosDone

		// Two leases were inside one critical section only when the
		// earlier one had been lost.
		var overlaps int
		overlapped.Range(func(k, _ any) bool {
			overlaps++
			if l := k.(*advisory.Lease); !errors.Is(l.Err(), advisory.ErrLockLost) {
				t.Errorf("two leases on %s inside at once, and the earlier one was not lost: %v", l.Key(), l.Err())
			}
			return true
		})
		for _, lk := range lockers {
			if err := lk.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
		pgRequireNoAppLocks(t, tg.DB, app)
		if accepted.Load() == 0 || terminated == 0 {
			logActivity(t, tg.DB)
			t.Fatalf("nothing to prove: %d writes accepted, %d backends terminated; %d of %d acquisitions failed, the last with %v",
				accepted.Load(), terminated, failed.Load(), ops, lastFailure.Load())
		}
		t.Logf("locker chaos: %d acquisitions tried, %d backends terminated; %d writes accepted, %d refused (each from a lease then reported lost), %d overlaps (each with a lost lease), %d leases lost; 0 violations, 0 locks left",
			ops, terminated, accepted.Load(), refused.Load(), overlaps, lost.Load())
	})
}

// logActivity logs the server's sessions as pg_stat_activity shows them,
// for a run that went wrong.
func logActivity(t *testing.T, obs *sql.DB) {
	t.Helper()
	rows, err := obs.QueryContext(context.Background(), `SELECT pid, coalesce(application_name, ''), coalesce(backend_type, ''),
		coalesce(state, ''), coalesce(wait_event_type || ':' || wait_event, ''), left(coalesce(query, ''), 80)
		FROM pg_catalog.pg_stat_activity ORDER BY pid`)
	if err != nil {
		t.Logf("pg_stat_activity: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		var app, typ, state, wait, query string
		if err := rows.Scan(&pid, &app, &typ, &state, &wait, &query); err != nil {
			t.Logf("pg_stat_activity: %v", err)
			return
		}
		t.Logf("pg_stat_activity: %d %q %s %s %s %q", pid, app, typ, state, wait, query)
	}
}

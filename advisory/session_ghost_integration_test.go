package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// The ghost-lock race tests of the session lock functions (subtests of
// TestSessionIntegration). A blocking acquire is raced against its own
// end: a cancel (from the server or from ctx) or a ctx deadline arrives in
// the instant the holder releases. Whatever happens, the library must give
// a true answer: nil only if the session holds the lock, an error only if
// the session is gone and holds nothing.

// raceOp is a blocking session acquire that a race test interrupts.
type raceOp struct {
	name   string
	shared bool
	// lock takes contested (and free, which sorts before it) on conn.
	lock func(ctx context.Context, conn *sql.Conn, contested, free advisory.Key) error
	// unlock releases what lock took.
	unlock func(ctx context.Context, conn *sql.Conn, contested, free advisory.Key) error
	// both reports whether lock takes free as well.
	both bool
}

// raceOps are the blocking acquires the race tests interrupt.
var raceOps = []raceOp{
	{
		name:   "Lock",
		lock:   func(ctx context.Context, c *sql.Conn, k, _ advisory.Key) error { return advisory.Lock(ctx, c, k) },
		unlock: func(ctx context.Context, c *sql.Conn, k, _ advisory.Key) error { return advisory.Unlock(ctx, c, k) },
	},
	{
		name:   "LockShared",
		shared: true,
		lock:   func(ctx context.Context, c *sql.Conn, k, _ advisory.Key) error { return advisory.LockShared(ctx, c, k) },
		unlock: func(ctx context.Context, c *sql.Conn, k, _ advisory.Key) error {
			return advisory.UnlockShared(ctx, c, k)
		},
	},
	{
		// The free key is taken first, then the statement waits for the
		// contested one: an interrupted wait leaves the first taken.
		name: "LockKeys",
		both: true,
		lock: func(ctx context.Context, c *sql.Conn, k, f advisory.Key) error {
			return advisory.LockKeys(ctx, c, k, f)
		},
		unlock: func(ctx context.Context, c *sql.Conn, k, f advisory.Key) error {
			return advisory.UnlockKeys(ctx, c, k, f)
		},
	},
}

// raceStats counts how the runs of a race test ended.
type raceStats struct {
	runs, acquired, ctxErr, serverCancel, other atomic.Int64
	// grantedAtError counts errors returned while the server showed the
	// waiter holding the contested key: the case that discarding covers.
	grantedAtError atomic.Int64
	otherSample    atomic.Value // an unexpected error, for the log
}

func (s *raceStats) log(t *testing.T) {
	t.Helper()
	t.Logf("%d runs: %d acquired; errors: %d ctx, %d server cancel (57014), %d other; %d errors arrived with the lock granted, and those sessions were closed",
		s.runs.Load(), s.acquired.Load(), s.ctxErr.Load(), s.serverCancel.Load(), s.other.Load(), s.grantedAtError.Load())
	if e, ok := s.otherSample.Load().(string); ok {
		t.Logf("an error of the other kind: %s", e)
	}
}

// raceRun is one contested acquire.
type raceRun struct {
	db, obs *sql.DB // db is the pool under test; obs observes
	holder  *sql.Conn
	op      raceOp
	k, free advisory.Key
	stats   *raceStats
	desc    string // what the run did, for failures
}

// prepare takes k on the holder and a waiter session from db.
func (r *raceRun) prepare() (waiter *sql.Conn, pid int, err error) {
	if err := advisory.Lock(context.Background(), r.holder, r.k); err != nil {
		return nil, 0, fmt.Errorf("holder Lock(%s): %w", r.k, err)
	}
	waiter, err = r.db.Conn(context.Background())
	if err != nil {
		return nil, 0, err
	}
	pid, err = pgtest.BackendPID(context.Background(), waiter)
	if err != nil {
		waiter.Close()
		return nil, 0, err
	}
	return waiter, pid, nil
}

// launch starts op on the waiter with ctx. done closes when op returns;
// *lockErr is valid then.
func (r *raceRun) launch(ctx context.Context, waiter *sql.Conn) (done chan struct{}, lockErr *error) {
	done = make(chan struct{})
	lockErr = new(error)
	go func() {
		defer close(done)
		*lockErr = r.op.lock(ctx, waiter, r.k, r.free)
	}()
	return done, lockErr
}

// check verifies the invariant after op returned lockErr on the waiter's
// session pid, and releases what the waiter holds.
func (r *raceRun) check(waiter *sql.Conn, pid int, lockErr error) error {
	ctx := context.Background()
	defer waiter.Close()
	r.stats.runs.Add(1)
	if lockErr == nil {
		// Reported acquired: the session must hold every key.
		r.stats.acquired.Add(1)
		if err := pgHoldsErr(ctx, r.obs, pid, r.k, r.op.shared); err != nil {
			return fmt.Errorf("%s: %s returned nil but %w", r.desc, r.op.name, err)
		}
		if r.op.both {
			if err := pgHoldsErr(ctx, r.obs, pid, r.free, false); err != nil {
				return fmt.Errorf("%s: %s returned nil but %w", r.desc, r.op.name, err)
			}
		}
		if err := r.op.unlock(ctx, waiter, r.k, r.free); err != nil {
			return fmt.Errorf("%s: release after a clean acquire: %w", r.desc, err)
		}
	} else {
		switch {
		case errors.Is(lockErr, context.Canceled), errors.Is(lockErr, context.DeadlineExceeded):
			r.stats.ctxErr.Add(1)
		case pgSQLState(lockErr) == "57014":
			r.stats.serverCancel.Add(1)
		default:
			r.stats.other.Add(1)
			r.stats.otherSample.Store(lockErr.Error())
		}
		if pgHoldsErr(ctx, r.obs, pid, r.k, r.op.shared) == nil {
			r.stats.grantedAtError.Add(1)
		}
		// Reported an error: the session must be gone, with its locks.
		if _, err := waiter.ExecContext(ctx, "SELECT 1"); !errors.Is(err, sql.ErrConnDone) {
			return fmt.Errorf("%s: %s returned %v, but the conn was kept (Exec: %v)", r.desc, r.op.name, lockErr, err)
		}
		if err := pgAwaitGone(r.obs, pid); err != nil {
			return fmt.Errorf("%s: %s returned %v: %w", r.desc, r.op.name, lockErr, err)
		}
	}
	// Nobody holds or waits for the keys any more.
	for _, k := range []advisory.Key{r.k, r.free} {
		locks, err := pgQueryLocksOfKey(ctx, r.obs, k)
		if err != nil {
			return err
		}
		if len(locks) > 0 {
			return fmt.Errorf("%s: %s returned %v; afterwards %s is still taken: %v", r.desc, r.op.name, lockErr, k, locks)
		}
	}
	return nil
}

// raceRuns returns how many runs a race test makes per server and driver.
func raceRuns() int {
	if testing.Short() {
		return 24
	}
	return 240
}

// raceWorkers is how many runs go on at once, each on its own keys.
const raceWorkers = 4

// runRaces runs raceRuns runs of one over raceWorkers goroutines, each
// with its own holder session from db, and then checks that no session of
// app holds an advisory lock.
func runRaces(t *testing.T, tg pgtest.Target, one func(r *raceRun, rnd *mrand.Rand) error) {
	t.Helper()
	app := pgtest.UniqueName("advisory-")
	db := pgtest.OpenApp(t, tg, app)
	seed := mrand.Uint64()
	t.Logf("seed %d, application_name %s", seed, app)
	keys := newPGKeys()
	stats := &raceStats{}
	var next atomic.Int64
	runs := int64(raceRuns())
	var wg sync.WaitGroup
	errs := make(chan error, raceWorkers)
	for w := range raceWorkers {
		wg.Go(func() {
			rnd := mrand.New(mrand.NewPCG(seed, uint64(w)))
			holder, err := db.Conn(context.Background())
			if err != nil {
				errs <- err
				return
			}
			defer holder.Close()
			for i := next.Add(1); i <= runs; i = next.Add(1) {
				op := raceOps[rnd.IntN(len(raceOps))]
				free := keys.next()
				r := &raceRun{db: db, obs: tg.DB, holder: holder, op: op, k: keys.next(), free: free, stats: stats}
				r.desc = fmt.Sprintf("run %d (%s on %s)", i, op.name, r.k)
				if err := one(r, rnd); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	stats.log(t)
	pgRequireNoAppLocks(t, tg.DB, app)
}

func testSessionGhostCancelGrantRace(t *testing.T) {
	pgtest.EachDriver(t, pgAllDrivers, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		runRaces(t, tg, func(r *raceRun, rnd *mrand.Rand) error {
			waiter, pid, err := r.prepare()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done, lockErr := r.launch(ctx, waiter)
			if err := pgAwaitWaiting(r.obs, pid, r.k, done); err != nil {
				// Unblock the waiter before reporting.
				cancel()
				_, _ = r.holder.ExecContext(context.Background(), "SELECT pg_advisory_unlock_all()")
				<-done
				return fmt.Errorf("%s: %w (lock returned %v)", r.desc, err, *lockErr)
			}

			// The holder releases and cancels the waiter in one
			// statement; ctx is cancelled before, around or after it,
			// or not at all.
			release := func() error {
				var unlocked, cancelled bool
				err := r.holder.QueryRowContext(context.Background(),
					"SELECT pg_advisory_unlock("+pgArg(r.k)+"), pg_cancel_backend($1)", pid).Scan(&unlocked, &cancelled)
				if err == nil && !unlocked {
					err = errors.New("holder did not hold the key")
				}
				if err != nil {
					return fmt.Errorf("%s: holder release: %w", r.desc, err)
				}
				return nil
			}
			delay := time.Duration(rnd.IntN(1000)) * time.Microsecond
			var canceller sync.WaitGroup
			switch when := rnd.IntN(4); when {
			case 0:
				r.desc += fmt.Sprintf(", ctx cancelled %v before the release", delay/4)
				cancel()
				time.Sleep(delay / 4)
				err = release()
			case 1:
				r.desc += fmt.Sprintf(", ctx cancelled %v after the release began", delay)
				canceller.Go(func() { time.Sleep(delay); cancel() })
				err = release()
			case 2:
				r.desc += fmt.Sprintf(", ctx cancelled %v after the release ended", delay/4)
				err = release()
				time.Sleep(delay / 4)
				cancel()
			default:
				r.desc += ", ctx not cancelled"
				err = release()
			}
			<-done
			canceller.Wait()
			if err != nil {
				return err
			}
			return r.check(waiter, pid, *lockErr)
		})
	})
}

func testSessionGhostDeadlineGrantRace(t *testing.T) {
	pgtest.EachDriver(t, pgAllDrivers, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		runRaces(t, tg, func(r *raceRun, rnd *mrand.Rand) error {
			// The waiter's deadline d is a few milliseconds away. The
			// holder starts its release between the start and a
			// millisecond after d; the release's own round trip lands it
			// a little later, so that grants fall on both sides of the
			// deadline and often within a millisecond of it.
			d := time.Duration(3000+rnd.IntN(7000)) * time.Microsecond
			jitter := -time.Duration(rnd.Int64N(int64(d+time.Millisecond))) + time.Millisecond
			r.desc += fmt.Sprintf(", deadline %v, release at deadline%+v", d, jitter)
			waiter, pid, err := r.prepare()
			if err != nil {
				return err
			}
			start := time.Now()
			ctx, cancel := context.WithDeadline(context.Background(), start.Add(d))
			defer cancel()
			done, lockErr := r.launch(ctx, waiter)
			time.Sleep(time.Until(start.Add(d + jitter)))
			var unlocked bool
			err = r.holder.QueryRowContext(context.Background(), "SELECT pg_advisory_unlock("+pgArg(r.k)+")").Scan(&unlocked)
			if err == nil && !unlocked {
				err = errors.New("holder did not hold the key")
			}
			<-done
			if err != nil {
				return fmt.Errorf("%s: holder release: %w", r.desc, err)
			}
			return r.check(waiter, pid, *lockErr)
		})
	})
}

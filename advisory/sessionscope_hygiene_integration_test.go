package advisory_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
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

// The pool-hygiene ghost-lock tests: many acquisitions through one small
// pool, with contention and cancellation at random points, after which no
// pooled session may hold an advisory lock. This file holds the run, and
// the test of WithSessionLock and the plain session functions on it, a
// subtest of TestWithSessionLockIntegration; WithXactLock's is in
// xactscope_integration_test.go.

// cancelPoint is when an acquisition's ctx is cancelled.
type cancelPoint int

const (
	cancelNever        cancelPoint = iota
	cancelBefore                   // before the call
	cancelWhileWaiting             // a moment after the call starts, often while it waits
	cancelInFn                     // while the lock is held, before or during a query
	cancelAfter                    // after the call returned
)

func (p cancelPoint) String() string {
	return [...]string{"never", "before", "while waiting", "in fn", "after"}[p]
}

// randomCancelPoint draws a point: mostly ones that interrupt something.
func randomCancelPoint(rnd *mrand.Rand) cancelPoint {
	switch n := rnd.IntN(20); {
	case n < 5:
		return cancelNever
	case n < 7:
		return cancelBefore
	case n < 12:
		return cancelWhileWaiting
	case n < 17:
		return cancelInFn
	default:
		return cancelAfter
	}
}

// rwGuard checks in memory what the locks promise: while a session holds a
// key exclusively, nobody else is inside; while sessions hold it shared,
// no exclusive holder is. A transaction holder whose context has ended
// does not count: database/sql then rolls its transaction back at once,
// from a goroutine of its own, so the server may release the lock while fn
// is still inside. Its context ends before that rollback starts, so a
// holder whose context was still live when another entered did hold the
// lock then. A session holder always counts: its lock ends only when the
// helper releases it or closes the session, after fn.
type rwGuard struct {
	mu        sync.Mutex
	holders   []map[*guardHolder]bool // per key
	violation atomic.Value            // string
}

// guardHolder is one session inside a guarded section.
type guardHolder struct {
	ctx    context.Context
	shared bool
	xact   bool // holds a transaction lock
}

// newRWGuard returns a guard for n keys.
func newRWGuard(n int) *rwGuard {
	g := &rwGuard{holders: make([]map[*guardHolder]bool, n)}
	for i := range g.holders {
		g.holders[i] = map[*guardHolder]bool{}
	}
	return g
}

// enter records a holder of key #i and reports a live holder it conflicts
// with. The caller passes the returned holder to leave.
func (g *rwGuard) enter(ctx context.Context, i int, shared, xact bool, desc string) *guardHolder {
	g.mu.Lock()
	defer g.mu.Unlock()
	exclusive, sharedN := 0, 0
	for h := range g.holders[i] {
		if h.xact && h.ctx.Err() != nil {
			continue
		}
		if h.shared {
			sharedN++
		} else {
			exclusive++
		}
	}
	if exclusive > 0 || (!shared && sharedN > 0) {
		g.violation.CompareAndSwap(nil, fmt.Sprintf("%s entered key #%d (shared=%v) while %d exclusive and %d shared holders were inside",
			desc, i, shared, exclusive, sharedN))
	}
	h := &guardHolder{ctx: ctx, shared: shared, xact: xact}
	g.holders[i][h] = true
	return h
}

func (g *rwGuard) leave(i int, h *guardHolder) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.holders[i], h)
}

func (g *rwGuard) check(t *testing.T) {
	t.Helper()
	if v, ok := g.violation.Load().(string); ok {
		t.Error("two sessions held one lock at once: " + v)
	}
}

// hygieneRun is what one acquisition of a hygiene test decided to do.
type hygieneRun struct {
	i       int // key index
	key     advisory.Key
	shared  bool
	point   cancelPoint
	delay   time.Duration // for cancelWhileWaiting and cancelInFn
	variant int           // 0 to 9, for the test's own choices
	desc    string
}

// newHygieneRun draws a run on one of keys.
func newHygieneRun(rnd *mrand.Rand, n int64, keys []advisory.Key) *hygieneRun {
	h := &hygieneRun{i: rnd.IntN(len(keys)), shared: rnd.IntN(5) == 0, point: randomCancelPoint(rnd)}
	h.key = keys[h.i]
	h.delay = time.Duration(rnd.IntN(2000)) * time.Microsecond
	h.variant = rnd.IntN(10)
	h.desc = fmt.Sprintf("acquisition %d (key %s, shared=%v, ctx cancelled %s)", n, h.key, h.shared, h.point)
	return h
}

// hygieneCtx returns the run's ctx, already cancelled for cancelBefore or
// due to be for cancelWhileWaiting, and a function that waits for any
// cancelling goroutine.
func (h *hygieneRun) hygieneCtx() (ctx context.Context, cancel context.CancelFunc, wait func()) {
	ctx, cancel = context.WithCancel(context.Background())
	var wg sync.WaitGroup
	switch h.point {
	case cancelBefore:
		cancel()
	case cancelWhileWaiting:
		wg.Go(func() { time.Sleep(h.delay); cancel() })
	}
	return ctx, cancel, wg.Wait
}

// critical is the work done under the lock: it checks exclusion in memory,
// then runs a query that a cancelInFn run interrupts (the query, not the
// guarded section, so that a session that dies with it, releasing the lock
// server-side, is not mistaken for two holders).
func (h *hygieneRun) critical(ctx context.Context, q pgtest.Querier, cancel context.CancelFunc, g *rwGuard) (wait func(), err error) {
	_, xact := q.(*sql.Tx)
	holder := g.enter(ctx, h.i, h.shared, xact, h.desc)
	time.Sleep(time.Duration(h.delay / 10))
	g.leave(h.i, holder)
	var wg sync.WaitGroup
	if h.point == cancelInFn {
		if h.delay < time.Millisecond {
			cancel()
		} else {
			wg.Go(func() { time.Sleep(h.delay - time.Millisecond); cancel() })
		}
	}
	_, err = q.ExecContext(ctx, "SELECT pg_sleep(0.001)")
	return wg.Wait, err
}

// hygieneCount returns how many acquisitions a hygiene test makes.
func hygieneCount() int64 {
	if testing.Short() {
		return 200
	}
	return 2000
}

// hygieneWorkers is how many goroutines share the pool of hygieneConns.
const (
	hygieneWorkers = 8
	hygieneConns   = 6
	hygieneKeys    = 3
)

// runHygiene runs hygieneCount acquisitions through one pool with
// application_name app, hygieneWorkers at a time, each made by one.
func runHygiene(t *testing.T, tg pgtest.Target, one func(db *sql.DB, h *hygieneRun, g *rwGuard) error) (db *sql.DB, app string, keys []advisory.Key) {
	t.Helper()
	app = pgtest.UniqueName("advisory-")
	db = pgtest.OpenApp(t, tg, app)
	db.SetMaxOpenConns(hygieneConns)
	gen := newPGKeys()
	keys = []advisory.Key{gen.next(), gen.nextPair(), gen.next()}
	seed := mrand.Uint64()
	t.Logf("seed %d, application_name %s", seed, app)
	g := newRWGuard(len(keys))
	var next atomic.Int64
	total := hygieneCount()
	var wg sync.WaitGroup
	errs := make(chan error, hygieneWorkers)
	for w := range hygieneWorkers {
		wg.Go(func() {
			rnd := mrand.New(mrand.NewPCG(seed, uint64(w)))
			for n := next.Add(1); n <= total; n = next.Add(1) {
				if err := one(db, newHygieneRun(rnd, n, keys), g); err != nil {
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
	g.check(t)
	pgRequireNoAppLocks(t, tg.DB, app)
	return db, app, keys
}

// hygieneOutcomes counts results by kind, for the log.
type hygieneOutcomes struct {
	mu      sync.Mutex
	m       map[string]int
	samples map[string]string // the first error of each kind
}

func (o *hygieneOutcomes) add(err error) {
	kind := "ok"
	switch {
	case err == nil:
	case errors.Is(err, errHygienePanic):
		kind = "panic"
	case errors.Is(err, advisory.ErrNotAcquired):
		kind = "not acquired"
	case errors.Is(err, advisory.ErrLockTimeout):
		kind = "lock timeout"
	case errors.Is(err, context.Canceled):
		kind = "canceled"
	case pgSQLState(err) == "57014":
		kind = "server cancel"
	case errors.Is(err, sql.ErrConnDone), errors.Is(err, sql.ErrTxDone):
		kind = "conn or tx done"
	case errors.Is(err, driver.ErrBadConn):
		kind = "bad conn"
	default:
		kind = "other"
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = make(map[string]int)
		o.samples = make(map[string]string)
	}
	o.m[kind]++
	if _, ok := o.samples[kind]; !ok && err != nil {
		o.samples[kind] = err.Error()
	}
}

func (o *hygieneOutcomes) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprintf("%v; first of each: %q", o.m, o.samples)
}

// interrupted reports whether h's ctx was cancelled before its call
// returned, so that an error is expected.
func (h *hygieneRun) interrupted() bool {
	return h.point == cancelBefore || h.point == cancelWhileWaiting || h.point == cancelInFn
}

// hygieneExcused reports whether err, from a call whose ctx was not cancelled
// while it ran, comes from the driver and the pool rather than the lock:
//
//   - database/sql gave up on a dead pooled connection before fn ran. pgx
//     closes a connection when a ctx ends one of its queries, and
//     database/sql learns it only when it hands the connection to the next
//     user, whose call fails after three such tries;
//   - with DriverPGXCancel, a cancel request that an earlier user of the
//     session sent for its own query arrived late and cancelled this one.
//
// Neither can leave a lock behind: the call failed, and advisory closed
// the session if it might hold one.
func hygieneExcused(driverName string, err error, fnRan bool) bool {
	return (errors.Is(err, driver.ErrBadConn) && !fnRan) ||
		(driverName == pgtest.DriverPGXCancel && pgSQLState(err) == "57014")
}

func testWithSessionLockGhostPoolHygiene(t *testing.T) {
	pgtest.EachDriver(t, pgAllDrivers, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		var outcomes hygieneOutcomes
		db, _, keys := runHygiene(t, tg, func(db *sql.DB, h *hygieneRun, g *rwGuard) error {
			ctx, cancel, wait := h.hygieneCtx()
			defer cancel()
			defer wait()
			var err error
			fnRan := false
			if h.variant < 5 {
				// The scoped helper.
				h.desc += " with WithSessionLock"
				var opts []advisory.LockOption
				if h.shared {
					opts = append(opts, advisory.Shared())
				}
				var fnErr error
				err = advisory.WithSessionLock(ctx, db, h.key, func(ctx context.Context, conn *sql.Conn) error {
					fnRan = true
					var waitFn func()
					waitFn, fnErr = h.critical(ctx, conn, cancel, g)
					waitFn()
					return fnErr
				}, as[advisory.SessionOption](opts)...)
				if fnErr != nil && !errors.Is(err, fnErr) {
					return fmt.Errorf("%s: fn returned %v, WithSessionLock %v", h.desc, fnErr, err)
				}
			} else {
				// The plain functions on a *sql.Conn.
				h.desc += " with Lock and Unlock"
				err = hygieneLockUnlock(ctx, db, h, cancel, g, &fnRan)
			}
			if h.point == cancelAfter {
				cancel()
			}
			outcomes.add(err)
			switch {
			case errors.Is(err, advisory.ErrLockLost) && fnRan && h.interrupted():
				// ctx ended while fn ran, and the driver dropped the
				// session with a statement of fn's: the lock ended
				// before fn did, and the scope says so.
			case errors.Is(err, advisory.ErrLockLost), errors.Is(err, advisory.ErrNotHeld):
				return fmt.Errorf("%s: a lock was lost: %w", h.desc, err)
			case err != nil && !h.interrupted() && !hygieneExcused(tg.Driver, err, fnRan):
				return fmt.Errorf("%s: uninterrupted acquisition failed: %w", h.desc, err)
			}
			return nil
		})
		t.Logf("outcomes: %v", &outcomes)

		// The pool still works.
		ran := false
		err := advisory.WithSessionLock(context.Background(), db, keys[0], func(context.Context, *sql.Conn) error {
			ran = true
			return nil
		})
		if err != nil || !ran {
			t.Fatalf("WithSessionLock after the storm = %v (fn ran: %v)", err, ran)
		}
		pgRequireFree(t, tg.DB, keys[0])
	})
}

// hygieneLockUnlock takes h's key with Lock or LockShared on a conn of
// db, does the critical work, and unlocks. It sets *fnRan once it holds
// the lock.
func hygieneLockUnlock(ctx context.Context, db *sql.DB, h *hygieneRun, cancel context.CancelFunc, g *rwGuard, fnRan *bool) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	lock, unlock := advisory.Lock, advisory.Unlock
	if h.shared {
		lock, unlock = advisory.LockShared, advisory.UnlockShared
	}
	if err := lock(ctx, conn, h.key); err != nil {
		// An acquire error closes the session.
		if _, execErr := conn.ExecContext(context.Background(), "SELECT 1"); !errors.Is(execErr, sql.ErrConnDone) {
			return fmt.Errorf("%s: lock returned %v but the conn was kept (Exec: %v)", h.desc, err, execErr)
		}
		return err
	}
	*fnRan = true
	wait, fnErr := h.critical(ctx, conn, cancel, g)
	wait()
	return errors.Join(fnErr, unlock(ctx, conn, h.key))
}

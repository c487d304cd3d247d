package advisory_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of leases and Lockers through PgBouncer in transaction
// mode (TestLeaseIntegration/Pooler), where a session lock cannot work:
// each statement may land on another backend, and two clients may share
// one, where their locks stack. A lease must be refused at acquisition, or
// be lost before any other client holds its key; and once everything is
// released, no lock and no mark may stay on a pooled backend.
//
// The default suite runs poolerShortRuns competitions per holder, rival,
// pool size, server and driver; PGADVISORY_TEST_LONG=1 runs
// poolerLongRuns, for the rates in docs/leases.md.

// poolerHeartbeat is the heartbeat of the leases taken through PgBouncer.
const poolerHeartbeat = 100 * time.Millisecond

// Runs per holder, rival, pool size, server and driver.
const (
	poolerShortRuns = 1
	poolerLongRuns  = 25
)

// poolerRuns returns the number of runs per combination.
func poolerRuns() int {
	if os.Getenv("PGADVISORY_TEST_LONG") == "1" {
		return poolerLongRuns
	}
	return poolerShortRuns
}

// isEnded reports whether err says that the call's backend was ended
// under it: through a pooler, a lease's end that lands on another backend
// ends the lease's backend, and with it whatever another client runs
// there (see docs/leases.md, "Through a transaction pooler"); or that a
// Locker ended its connection for want of an answer.
func isEnded(err error) bool {
	var e interface{ SQLState() string }
	return errors.As(err, &e) && e.SQLState() == "57P01" ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "server conn crashed") ||
		// A Locker whose statement went unanswered within the heartbeat
		// (100 ms here, which a loaded machine can miss) ends that
		// connection and what it held.
		errors.Is(err, scope.ErrLockLost) && strings.Contains(err.Error(), "no answer within")
}

// isPooler reports whether err is the refusal of a shared session.
func isPooler(err error) bool {
	return errors.Is(err, scope.ErrSharedSession) && strings.Contains(err.Error(), "the session is shared")
}

// A poolerHolder takes a lease on key through the pooler: a lease of its
// own (Acquire) or one on a Locker of its own. end releases the lease,
// and closes the Locker.
type poolerHolder struct {
	name    string
	acquire func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key) (l *advisory.Lease, end func(), err error)
}

// A poolerRival takes key another way, through the same pooler, while the
// holder believes it holds it, and reports whether it held the key while
// held() was still true.
type poolerRival struct {
	name string
	take func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, held func() bool) (acquired, overlap bool, err error)
}

var poolerHolders = []poolerHolder{
	{"Lease", func(ctx context.Context, _ *testing.T, db *sql.DB, key advisory.Key) (*advisory.Lease, func(), error) {
		l, err := advisory.Acquire(ctx, db, key, advisory.Try(), advisory.Heartbeat(poolerHeartbeat))
		if err != nil {
			return nil, nil, err
		}
		return l, func() { _ = l.Release(ctx) }, nil
	}},
	{"Locker", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key) (*advisory.Lease, func(), error) {
		lk, err := advisory.NewLocker(db, advisory.LockerConfig{Heartbeat: poolerHeartbeat})
		if err != nil {
			t.Fatal(err)
		}
		l, err := lk.Acquire(ctx, key, advisory.Try())
		end := func() {
			if l != nil {
				_ = l.Release(ctx)
			}
			_ = lk.Close(ctx)
		}
		if err != nil {
			end()
			return nil, nil, err
		}
		return l, end, nil
	}},
}

// leaseRival takes key with a lease of acquire's, and holds it for a
// heartbeat.
func leaseRival(acquire func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key) (*advisory.Lease, func(), error)) func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, held func() bool) (bool, bool, error) {
	return func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, held func() bool) (bool, bool, error) {
		l, end, err := acquire(ctx, t, db, key)
		if err != nil {
			return false, false, err
		}
		defer end()
		overlap := held() && l.Err() == nil
		time.Sleep(poolerHeartbeat)
		return true, overlap, nil
	}
}

var poolerRivals = []poolerRival{
	{"Lease", leaseRival(poolerHolders[0].acquire)},
	{"Locker", leaseRival(poolerHolders[1].acquire)},
	{"SessionLock", func(ctx context.Context, _ *testing.T, db *sql.DB, key advisory.Key, held func() bool) (bool, bool, error) {
		var overlap bool
		err := advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error {
			overlap = held()
			return nil
		}, advisory.Try())
		return err == nil, overlap, err
	}},
	{"SessionLockHeartbeat", func(ctx context.Context, _ *testing.T, db *sql.DB, key advisory.Key, held func() bool) (bool, bool, error) {
		// A session scope with a heartbeat holds its lock as a lease, and
		// ends as one: its end acts on its own backend alone. Its own
		// heartbeat may find the pooler while fn runs, and report the
		// loss: it took the key all the same.
		var ran, overlap bool
		err := advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error {
			ran, overlap = true, held()
			time.Sleep(poolerHeartbeat)
			return nil
		}, advisory.Try(), advisory.Heartbeat(poolerHeartbeat))
		if ran && errors.Is(err, advisory.ErrLockLost) {
			err = nil
		}
		return ran && err == nil, overlap, err
	}},
	{"XactLock", func(ctx context.Context, _ *testing.T, db *sql.DB, key advisory.Key, held func() bool) (bool, bool, error) {
		var overlap bool
		err := advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error {
			overlap = held()
			return nil
		}, advisory.Try())
		return err == nil, overlap, err
	}},
}

// poolerCount counts how the runs of one holder and rival ended.
type poolerCount struct {
	runs, refused, lostAlone, rivalRefused, rivalBusy, rivalAcquired, overlaps int
	ended                                                                      int // the holder's or the rival's backend was ended under it
}

func (c poolerCount) String() string {
	return fmt.Sprintf("%d runs: holder refused %d, holder lost before the rival %d, rival refused %d, rival found the key busy %d, "+
		"rival acquired %d, rival held the key while the holder believed it held it %d, a backend ended under a call %d",
		c.runs, c.refused, c.lostAlone, c.rivalRefused, c.rivalBusy, c.rivalAcquired, c.overlaps, c.ended)
}

// poolerRun runs one competition for key: the holder takes a lease
// through dbA and keeps it through a heartbeat; then the rival takes the
// key through dbB.
func poolerRun(t *testing.T, h poolerHolder, r poolerRival, key advisory.Key, dbA, dbB *sql.DB, c *poolerCount) {
	t.Helper()
	ctx := context.Background()
	c.runs++
	la, end, err := h.acquire(ctx, t, dbA, key)
	switch {
	case isPooler(err):
		c.refused++
		return
	case err != nil && isEnded(err):
		c.ended++
		return
	case err != nil:
		t.Fatalf("holder %s: Acquire(%s) = %v; want success or the pooler error", h.name, key, err)
	}
	defer end()
	awaitBeats(t, 1, la)
	if la.Err() != nil {
		c.lostAlone++
		return
	}
	acquired, overlap, err := r.take(ctx, t, dbB, key, func() bool { return la.Err() == nil })
	switch {
	case isPooler(err):
		c.rivalRefused++
	case errors.Is(err, advisory.ErrNotAcquired):
		c.rivalBusy++
	case err != nil && !acquired && isEnded(err):
		c.ended++
	case err != nil && !acquired:
		t.Fatalf("rival %s: %v; want the pooler error, ErrNotAcquired or success", r.name, err)
	case acquired:
		c.rivalAcquired++
		if overlap {
			c.overlaps++
		}
	}
}

// onEveryBackend runs f in a transaction on every backend of a pool of
// size pool behind db: pool transactions open at once each pin a backend.
// They end together, committed when commit is set and rolled back
// otherwise.
func onEveryBackend(t *testing.T, db *sql.DB, pool int, commit bool, f func(tx *sql.Tx)) {
	t.Helper()
	var txs []*sql.Tx
	defer func() {
		for _, tx := range txs {
			if commit {
				_ = tx.Commit()
			} else {
				_ = tx.Rollback()
			}
		}
	}()
	for range pool {
		tx, err := db.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		txs = append(txs, tx)
		f(tx)
	}
}

// poolerMarks returns the lease marks on every backend of a pool of size
// pool behind db.
func poolerMarks(t *testing.T, db *sql.DB, pool int) []string {
	t.Helper()
	var marks []string
	onEveryBackend(t, db, pool, false, func(tx *sql.Tx) {
		var mark sql.NullString
		if err := tx.QueryRowContext(context.Background(), "SELECT pg_catalog.current_setting('pgadvisory.lease', true)").Scan(&mark); err != nil {
			t.Fatal(err)
		}
		if mark.String != "" {
			marks = append(marks, mark.String)
		}
	})
	return marks
}

// poolerClearStale sends, on every backend of a pool of size pool behind
// db, the statement that a lock call refused for a mark sends
// ([sqltext.ClearStaleMark]), and returns how many marks it cleared:
// those that sat beside no advisory lock, which the first lock call
// that lands on their backend clears.
func poolerClearStale(t *testing.T, db *sql.DB, pool int) int {
	t.Helper()
	cleared := 0
	onEveryBackend(t, db, pool, true, func(tx *sql.Tx) {
		res, err := tx.ExecContext(context.Background(), sqltext.ClearStaleMark)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 1 {
			cleared++
		}
	})
	return cleared
}

// awaitKeysFree waits until none of keys is held on the server that
// direct connects to, and reports those still held after PollTimeout, or
// after a second when brief.
func awaitKeysFree(direct *sql.DB, keys []advisory.Key, brief bool) []string {
	var held []string
	deadline := time.Now().Add(time.Second)
	_ = pgtest.Poll(20*time.Millisecond, func() (bool, error) {
		if brief && time.Now().After(deadline) {
			return true, nil
		}
		held = held[:0]
		for _, k := range keys {
			locks, err := pgtest.LocksOf(context.Background(), direct, k)
			if err != nil {
				return false, err
			}
			if len(locks) > 0 {
				held = append(held, fmt.Sprintf("%s: %v", k, locks))
			}
		}
		return len(held) == 0, nil
	})
	return held
}

// poolerNoise keeps the pool's backends changing hands until stop is
// closed: clients run short transactions through db, so that PgBouncer
// hands each statement of the holder and the rival whichever backend is
// free, not the one it used last. Their errors are ignored: a backend
// that a lease's end terminates fails the transaction running there.
func poolerNoise(db *sql.DB, clients int, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				tx, err := db.BeginTx(context.Background(), nil)
				if err != nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				_, _ = tx.ExecContext(context.Background(), "SELECT pg_catalog.pg_sleep(0.005)")
				_ = tx.Rollback()
			}
		})
	}
	return &wg
}

// testLeasePooler takes a lease, or a Locker's lease, through
// PgBouncer in transaction mode with pool sizes 1 to 4, and has another
// client take the same key through the same PgBouncer with a lease, a
// Locker, a session scope and a transaction scope: first with nothing
// else on the pooler (Quiet), then while other clients keep its backends
// changing hands (Busy). No rival may hold the key while the holder
// believes it holds it, in either phase. After each phase the test counts
// the keys left held and the marked backends, and how many of those marks
// are stale (beside no advisory lock, so that the first lock call refused
// there clears them), and logs them, for docs/leases.md: it does not
// require none, since a loss for want of an
// answer, or a lease refused at its start whose tries to undo its lock
// all land on other backends, can leave a lock and a mark on a pooled
// backend (see "Through a transaction pooler" there), on a loaded machine
// even in the quiet phase.
func testLeasePooler(t *testing.T) {
	runs := poolerRuns()
	for _, srv := range pgtest.Servers(t) {
		direct := srv.Open(t, pgtest.DriverPQ)
		for pool := 1; pool <= 4; pool++ {
			for _, d := range pgtest.Drivers {
				t.Run(fmt.Sprintf("%s/Pool%d/%s", srv.Name, pool, d), func(t *testing.T) {
					t.Parallel()
					bouncer := srv.PgBouncer(t, pool)
					dbA, dbB := bouncer.Open(t, d), bouncer.Open(t, d)
					keys := newPGKeys()
					for _, busy := range []bool{false, true} {
						var used []advisory.Key
						load := "Quiet"
						stop := make(chan struct{})
						var noise *sync.WaitGroup
						if busy {
							load = "Busy"
							noise = poolerNoise(bouncer.Open(t, d), 2, stop)
						}
						for _, h := range poolerHolders {
							for _, r := range poolerRivals {
								var c poolerCount
								for range runs {
									k := keys.next()
									used = append(used, k)
									poolerRun(t, h, r, k, dbA, dbB, &c)
								}
								t.Logf("%s: holder %s, rival %s: %v", load, h.name, r.name, c)
								if c.overlaps > 0 {
									t.Errorf("%s: holder %s, rival %s: the rival held the key while the holder believed it held it, %d of %d runs",
										load, h.name, r.name, c.overlaps, c.runs)
								}
							}
						}
						close(stop)
						if noise != nil {
							noise.Wait()
						}
						report := t.Logf
						held := awaitKeysFree(direct, used, busy)
						marks := poolerMarks(t, dbA, pool)
						t.Logf("%s: after every lease was released: %d of %d keys still held, %d of %d pooled backends marked",
							load, len(held), len(used), len(marks), pool)
						if len(held) > 0 {
							report("%s: after every lease was released: %d keys still held: %v", load, len(held), held)
						}
						if len(marks) > 0 {
							report("%s: after every lease was released: %d pooled backends bear a lease's mark: %v", load, len(marks), marks)
							stale := poolerClearStale(t, dbA, pool)
							t.Logf("%s: %d of the %d marks sat beside no advisory lock: stale, cleared by the first lock call refused there", load, stale, len(marks))
						}
					}
				})
			}
		}
	}
}

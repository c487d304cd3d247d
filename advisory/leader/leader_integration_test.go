package leader_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/leader"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of leader election: takeovers after the leader's
// backend is terminated, the server restarts or freezes, judged by fencing
// tokens on a table, with the time to a new leader measured.

// runs returns how many takeovers each event gets: def in the default run,
// PGADVISORY_RECIPE_RUNS when that is set (20 for docs/recipes.md).
func runs(t *testing.T, def int) int {
	if v := os.Getenv("PGADVISORY_RECIPE_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PGADVISORY_RECIPE_RUNS=%q: want a positive number", v)
		}
		return n
	}
	return def
}

// randomKey returns a key no other test uses.
func randomKey() advisory.Key { return advisory.PairKey(0x1eade7, rand.Int32()) }

// lead is one candidate's start as leader.
type lead struct {
	cand  int
	token int64
	at    time.Time
}

// election is candidates running leader.Run on one key, each leader
// writing its fencing token to a fenced table while it leads.
type election struct {
	t     *testing.T
	db    *sql.DB
	key   advisory.Key
	table string // the fence: one row holding the highest token accepted
	log   string // every accepted write, in the order the fence accepted them

	mu    sync.Mutex
	leads []lead

	acting   atomic.Int32 // candidates inside fn now
	leading  atomic.Int32 // candidates whose lead's context has not ended
	overlaps atomic.Int64 // times a candidate entered fn while another was inside
	accepted atomic.Int64
	refused  atomic.Int64 // writes the fence refused: a deposed leader's
	failed   atomic.Int64 // writes that failed (server down)
}

func newElection(t *testing.T, db *sql.DB) *election {
	suffix := strconv.FormatUint(uint64(rand.Uint32()), 36)
	e := &election{t: t, db: db, key: randomKey(), table: "leader_fence_" + suffix, log: "leader_log_" + suffix}
	ctx := context.Background()
	for _, q := range []string{
		"CREATE TABLE " + e.table + " (id int PRIMARY KEY, token bigint NOT NULL)",
		"INSERT INTO " + e.table + " VALUES (1, 0)",
		"CREATE TABLE " + e.log + " (seq bigserial PRIMARY KEY, token bigint NOT NULL, cand int NOT NULL)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+e.table+", "+e.log)
	})
	return e
}

// start runs n candidates until the test's cleanup, each on db.
func (e *election) start(n int, opts ...leader.Option) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make([]error, n)
	for c := range n {
		wg.Go(func() { errs[c] = leader.Run(ctx, e.db, e.key, e.fn(c), opts...) })
	}
	e.t.Cleanup(func() {
		cancel()
		wg.Wait()
		for c, err := range errs {
			if !errors.Is(err, context.Canceled) {
				e.t.Errorf("candidate %d: Run = %v; want context.Canceled", c, err)
			}
		}
	})
}

// fn is candidate c's work as leader: record the start, then write the
// token through the fence every few milliseconds until the lead ends.
// Writes are not bound to ctx, so that a leader that has not yet noticed
// its loss keeps writing, as a real one would.
func (e *election) fn(c int) leader.LeadFunc {
	return func(ctx context.Context, l *advisory.Lease) error {
		if e.acting.Add(1) > 1 {
			e.overlaps.Add(1)
		}
		defer e.acting.Add(-1)
		e.leading.Add(1)
		context.AfterFunc(ctx, func() { e.leading.Add(-1) })
		e.mu.Lock()
		e.leads = append(e.leads, lead{cand: c, token: l.Token(), at: time.Now()})
		e.mu.Unlock()
		q := `WITH u AS (UPDATE ` + e.table + ` SET token = $1 WHERE id = 1 AND token <= $1 RETURNING token)
			INSERT INTO ` + e.log + ` (token, cand) SELECT token, $2 FROM u`
		for ctx.Err() == nil {
			wctx, cancel := context.WithTimeout(context.Background(), time.Second)
			res, err := e.db.ExecContext(wctx, q, l.Token(), c)
			cancel()
			switch n, _ := rowsAffected(res, err); {
			case err != nil:
				e.failed.Add(1)
			case n == 1:
				e.accepted.Add(1)
			default:
				e.refused.Add(1)
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
		return nil
	}
}

func rowsAffected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// next waits for a leader whose token is above after, and returns it.
func (e *election) next(after int64) lead {
	e.t.Helper()
	var got lead
	pgtest.Await(e.t, fmt.Sprintf("a new leader after token %d", after), func() (bool, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, l := range e.leads {
			if l.token > after {
				got = l
				return true, nil
			}
		}
		return false, nil
	})
	return got
}

// awaitDeposed waits until no candidate but the leader is inside fn:
// every deposed leader has noticed its loss and stopped writing, so that
// [election.check] sees every write they made.
func (e *election) awaitDeposed() {
	e.t.Helper()
	pgtest.Await(e.t, "the deposed leaders to stop", func() (bool, error) { return e.acting.Load() <= 1, nil })
}

// check asserts, from the log, that the fence accepted no stale write:
// accepted tokens never go down; and that leaders' tokens increase.
func (e *election) check() {
	e.t.Helper()
	var stale, rows int
	q := `SELECT count(*) FILTER (WHERE token < prev), count(*) FROM
		(SELECT token, lag(token) OVER (ORDER BY seq) AS prev FROM ` + e.log + `) s`
	if err := e.db.QueryRowContext(context.Background(), q).Scan(&stale, &rows); err != nil {
		e.t.Fatal(err)
	}
	if stale != 0 {
		e.t.Errorf("%d stale writes accepted out of %d", stale, rows)
	}
	if rows == 0 {
		e.t.Error("no write accepted")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := 1; i < len(e.leads); i++ {
		if e.leads[i].token <= e.leads[i-1].token {
			e.t.Errorf("leader %d took token %d after %d", i, e.leads[i].token, e.leads[i-1].token)
		}
	}
	e.t.Logf("%d leads; writes: %d accepted, %d refused by the fence (a deposed leader's), %d failed; fn overlapped %d times",
		len(e.leads), e.accepted.Load(), e.refused.Load(), e.failed.Load(), e.overlaps.Load())
}

// takeovers measures n takeovers caused by event, which returns when it
// began, and logs p50 and max of the time to a new leader.
func (e *election) takeovers(name string, n int, event func(cur lead) time.Time) {
	e.t.Helper()
	cur := e.next(0)
	e.mu.Lock()
	cur = e.leads[len(e.leads)-1] // the latest leader
	e.mu.Unlock()
	var ds []time.Duration
	for range n {
		// The other candidates wait in the server, not polling.
		pgtest.AwaitWaiting(e.t, e.db, e.key)
		t0 := event(cur)
		nl := e.next(cur.token)
		e.t.Logf("%s: candidate %d leads with token %d, %v after the event", name, nl.cand, nl.token, nl.at.Sub(t0))
		ds = append(ds, nl.at.Sub(t0))
		cur = nl
	}
	slices.Sort(ds)
	e.t.Logf("%s: time to a new leader over %d takeovers: p50 %v, max %v",
		name, n, ds[len(ds)/2].Round(10*time.Microsecond), ds[len(ds)-1].Round(10*time.Microsecond))
}

// leaderPID returns the backend that leads, through leader.Current.
func (e *election) leaderPID() int {
	e.t.Helper()
	var info leader.Info
	pgtest.Await(e.t, "leader.Current to find a leader", func() (bool, error) {
		i, ok, err := leader.Current(context.Background(), e.db, e.key)
		info = i
		return ok, err
	})
	return info.PID
}

var testOpts = []leader.Option{
	leader.Heartbeat(200 * time.Millisecond),
	leader.Backoff(10*time.Millisecond, 200*time.Millisecond),
	leader.Fencing(),
}

// TestTakeoverOnTerminate: five candidates; the leader's backend is
// terminated again and again.
func TestTakeoverOnTerminate(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		e := newElection(t, tg.DB)
		e.start(5, testOpts...)
		e.takeovers("terminate", runs(t, 5), func(lead) time.Time {
			pid := e.leaderPID()
			t0 := time.Now()
			if _, err := tg.DB.Exec("SELECT pg_terminate_backend($1)", pid); err != nil {
				t.Fatal(err)
			}
			return t0
		})
		e.awaitDeposed()
		e.check()
	})
}

// TestTakeoverOnRestartAndPause: the server restarts under five candidates; and
// the server freezes, so the leader gives up its lease.
func TestTakeoverOnRestartAndPause(t *testing.T) {
	for _, s := range pgtest.StartServer(t) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			// One driver at a time: a restart or a pause hits everyone
			// on the server.
			for _, driver := range pgtest.Drivers {
				t.Run(driver, func(t *testing.T) {
					db := s.Open(t, driver)
					e := newElection(t, db)
					e.start(5, testOpts...)
					e.takeovers("restart", runs(t, 2), func(lead) time.Time {
						t0 := time.Now()
						s.Restart(t)
						t.Logf("restart took %v", time.Since(t0).Round(time.Millisecond))
						return t0
					})
					e.takeovers("pause 1s (from unpause)", runs(t, 2), func(cur lead) time.Time {
						p0 := time.Now()
						unpause := s.Pause(t)
						// The leader gives its lease up within two
						// heartbeats, and its lead's context ends; its
						// fn may still wait for a write to the frozen
						// server.
						pgtest.Await(t, "the leader to give its lease up", func() (bool, error) { return e.leading.Load() == 0, nil })
						t.Logf("pause: the leader stepped down after %v", time.Since(p0).Round(time.Millisecond))
						time.Sleep(time.Second - time.Since(p0))
						unpause()
						return time.Now()
					})
					e.awaitDeposed()
					e.check()
				})
			}
		})
	}
}

// TestRunReturns checks what fn's return does, and Current.
func TestRunReturns(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()

		t.Run("ErrorWhileLeading", func(t *testing.T) {
			key := randomKey()
			boom := errors.New("boom")
			err := leader.Run(ctx, tg.DB, key, func(ctx context.Context, l *advisory.Lease) error {
				info, ok, err := leader.Current(ctx, tg.DB, key)
				if err != nil || !ok || info.PID == 0 || info.BackendStart.IsZero() {
					t.Errorf("Current = %+v, %v, %v", info, ok, err)
				}
				return boom
			}, testOpts...)
			if !errors.Is(err, boom) {
				t.Fatalf("Run = %v; want fn's error", err)
			}
			pgtest.AwaitFree(t, tg.DB, key)
			if _, ok, err := leader.Current(ctx, tg.DB, key); ok || err != nil {
				t.Fatalf("Current after Run = %v, %v; want nobody", ok, err)
			}
		})

		t.Run("NilStepsDown", func(t *testing.T) {
			key := randomKey()
			cctx, cancel := context.WithCancel(ctx)
			var terms atomic.Int32
			err := leader.Run(cctx, tg.DB, key, func(ctx context.Context, l *advisory.Lease) error {
				if terms.Add(1) == 3 {
					cancel()
					<-ctx.Done() // Run's ctx ends fn's
				}
				return nil
			}, testOpts...)
			if !errors.Is(err, context.Canceled) || terms.Load() != 3 {
				t.Fatalf("Run = %v after %d terms; want context.Canceled after 3", err, terms.Load())
			}
			pgtest.AwaitFree(t, tg.DB, key)
		})

		t.Run("CancelWhileCampaigning", func(t *testing.T) {
			key := randomKey()
			holder, err := advisory.Acquire(ctx, tg.DB, key)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Release(ctx)
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				done <- leader.Run(cctx, tg.DB, key, func(context.Context, *advisory.Lease) error {
					t.Error("led while another held the key")
					return nil
				}, testOpts...)
			}()
			pgtest.AwaitWaiting(t, tg.DB, key)
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("Run = %v; want context.Canceled", err)
			}
		})
	})
}

func ExampleInfo() {
	fmt.Println(leader.Info{PID: 4242, ApplicationName: "scheduler"})
	// Output: pid 4242 (scheduler)
}

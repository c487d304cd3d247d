package pgxlock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// ghostRuns is how many contested acquires each ghost test races.
const ghostRuns = 200

// ctxWatchers are the two ways pgx can end a statement whose context
// ended: by default it sets a deadline on the socket and closes the
// connection; with CancelRequestContextWatcherHandler it asks the server
// to cancel the statement and keeps the session, so that a late cancel
// can hit a later statement.
var ctxWatchers = []struct {
	name  string
	apply func(cfg *pgxpool.Config)
}{
	{"Deadline", func(*pgxpool.Config) {}},
	{"CancelRequest", func(cfg *pgxpool.Config) {
		cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: time.Second}
		}
	}},
}

// ghostOp is a blocking acquire on a pool that a ghost test interrupts.
// It calls arm right before the lock call, for the context to make the
// call under, which starts the race. It reports whether it returned with
// the lock held, after checking that the server agrees; it ends what it
// took before it returns, unless t failed.
type ghostOp func(t *testing.T, arm func() context.Context, g *ghostRace, k advisory.Key) (acquired bool, err error)

// ghostRace is the state of a ghost test on one pool.
type ghostRace struct {
	pool      *pgxpool.Pool
	obs       *sql.DB
	destroyed closedConns
	doubt     map[*pgx.Conn]int // connections a lock call discarded → backend pid
	// grantedAtError counts session lock calls that failed while the
	// server still showed their session holding the key: the case that
	// closing the connection covers. It is informational: the session
	// may end before it is looked for.
	grantedAtError int
}

// ghostOps are the acquires the ghost test races: a session lock on one
// of the pool's connections, a transaction lock in one of its
// transactions, and a transaction scope on it.
var ghostOps = []struct {
	name string
	op   ghostOp
}{
	{"Lock", func(t *testing.T, arm func() context.Context, g *ghostRace, k advisory.Key) (bool, error) {
		conn, err := g.pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		pc := conn.Conn()
		if _, ok := g.doubt[pc]; ok {
			t.Fatal("the pool handed out a connection a lock call had discarded")
		}
		pid := pidOf(t, conn)
		err = pgxlock.Lock(arm(), conn, k)
		if err != nil {
			if !pc.IsClosed() {
				t.Fatalf("Lock returned %v and left its connection open: it may hold the lock", err)
			}
			g.doubt[pc] = pid
			for _, l := range holders(t, g.obs, k) {
				if l.PID == pid {
					g.grantedAtError++
				}
			}
			return false, err
		}
		requireHeld(t, g.obs, k, false, pid)
		return true, pgxlock.Unlock(context.Background(), conn, k)
	}},
	{"XactLock", func(t *testing.T, arm func() context.Context, g *ghostRace, k advisory.Key) (bool, error) {
		tx, err := g.pool.Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.Background())
		pid := pidOf(t, tx)
		if err := pgxlock.XactLock(arm(), tx, k); err != nil {
			return false, err // the deferred rollback ends any lock
		}
		requireHeld(t, g.obs, k, false, pid)
		return true, tx.Commit(context.Background())
	}},
	{"WithXactLock", func(t *testing.T, arm func() context.Context, g *ghostRace, k advisory.Key) (bool, error) {
		ran := false
		err := pgxlock.WithXactLock(arm(), g.pool, k, func(_ context.Context, tx pgx.Tx) error {
			ran = true
			requireHeld(t, g.obs, k, false, pidOf(t, tx))
			return nil
		})
		if err != nil && ran && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WithXactLock ran fn and failed with %v", err)
		}
		return err == nil, err
	}},
}

// TestNoGhostLocks races the end of a blocking acquire (a ctx deadline or
// a cancel, at a random moment) against the grant of a busy key (its
// holder lets go at another random moment), many times over, on a pool.
// Whatever happens, the call must tell the truth: nil only with the lock
// held, and an error only when nothing the caller cannot see is held. A
// session lock call that fails closes its connection, which the pool
// then destroys and never hands out again; after every run the key must
// become free, and at the end no idle connection of the pool may hold
// an advisory lock.
func TestNoGhostLocks(t *testing.T) {
	eachServer(t, func(t *testing.T, s *pgtest.Server, obs *sql.DB) {
		for _, w := range ctxWatchers {
			t.Run(w.name, func(t *testing.T) {
				g := &ghostRace{obs: obs, doubt: make(map[*pgx.Conn]int)}
				g.pool = newPool(t, s.DSN, func(cfg *pgxpool.Config) {
					w.apply(cfg)
					g.destroyed.watch(cfg)
					cfg.MaxConns = 4
				})
				holder := connect(t, s.DSN)
				k := randomKey()
				var acquired, failed [3]int
				for run := range ghostRuns {
					i := mrand.IntN(len(ghostOps))
					op := ghostOps[i]
					if err := pgxlock.Lock(context.Background(), holder, k); err != nil {
						t.Fatal(err)
					}
					// The call's ctx ends, and the holder lets go, each at
					// a random moment from the start of the lock call.
					end := time.Duration(mrand.Int64N(int64(6 * time.Millisecond)))
					let := time.Duration(mrand.Int64N(int64(4 * time.Millisecond)))
					var cancel context.CancelFunc = func() {}
					unlocked := make(chan error, 1)
					arm := func() context.Context {
						var ctx context.Context
						if run%2 == 0 {
							ctx, cancel = context.WithTimeout(context.Background(), end)
						} else {
							ctx, cancel = context.WithCancel(context.Background())
							time.AfterFunc(end, cancel)
						}
						time.AfterFunc(let, func() { unlocked <- pgxlock.Unlock(context.Background(), holder, k) })
						return ctx
					}
					ok, err := op.op(t, arm, g, k)
					cancel()
					if uerr := <-unlocked; uerr != nil {
						t.Fatalf("run %d: the holder's Unlock: %v", run, uerr)
					}
					if ok {
						if err != nil {
							t.Fatalf("run %d: %s: releasing what it took: %v", run, op.name, err)
						}
						acquired[i]++
					} else {
						failed[i]++
					}
					pgtest.AwaitFree(t, obs, k)
				}
				for i, op := range ghostOps {
					t.Logf("%s: %d acquired, %d failed", op.name, acquired[i], failed[i])
				}
				t.Logf("%d session lock calls failed and discarded their connection; %d of them were seen holding the key as they failed", len(g.doubt), g.grantedAtError)
				for pc, pid := range g.doubt {
					pgtest.AwaitGone(t, obs, pid)
					pgtest.Await(t, fmt.Sprintf("the pool to destroy the connection of backend %d", pid), func() (bool, error) {
						return g.destroyed.has(pc), nil
					})
				}
				requireIdleClean(t, g.pool)
			})
		}
	})
}

package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of calls on a session whose server stops answering
// (unanswered.go): a [pgtest.Gate] freezes the connection, as a stopped
// backend or a network that drops packets would, and each call must
// return by itself, with an error, while the server is still frozen, and
// leave its session closed, so that the server ends it, and its locks,
// once it answers again.

// TestUnansweredIntegration runs the integration tests of calls on a
// server that stops answering (unanswered.go), one subtest a theme. Its
// one subtest is parallel, as it was when it was a test of its own.
func TestUnansweredIntegration(t *testing.T) {
	t.Parallel()
	t.Run("FrozenServer", testUnansweredFrozenServer)
}

// frozenDeadline is the deadline of each call on a frozen session.
const frozenDeadline = 2 * time.Second

// frozenValve is how long a test waits for a call on a frozen session
// before it thaws the server, so that a call that never returns by itself
// fails the test instead of hanging it.
const frozenValve = 30 * time.Second

// frozenCase is one call on a session that stops answering.
type frozenCase struct {
	name string
	long bool // only under PGADVISORY_TEST_LONG=1: it waits for a bound longer than frozenDeadline
	// mayTake is set for a Locker, which gives a connection that does not
	// answer up after its heartbeat interval and may take the key on
	// another: the gate lets new connections through.
	mayTake bool
	// setup prepares the call on db, whose connections all lead through
	// the gate, before the freeze, and returns the call.
	setup func(t *testing.T, db *sql.DB, key advisory.Key) func(ctx context.Context) error
	// freezes is set for a call that freezes the gate itself, through
	// frozenGate; the others run on a gate frozen before they start.
	freezes bool
}

// frozenGate is the gate of the run whose call runs under ctx, for a
// call that freezes it itself.
type frozenGate struct{}

// freezeOf freezes the gate that ctx carries.
func freezeOf(ctx context.Context) { ctx.Value(frozenGate{}).(*pgtest.Gate).Freeze() }

// frozenCases are the calls measured.
var frozenCases = []frozenCase{
	{name: "TryLock", setup: func(t *testing.T, db *sql.DB, key advisory.Key) func(context.Context) error {
		conn := pgtest.Conn(t, db)
		pgtest.PID(t, conn)
		return func(ctx context.Context) error {
			_, err := advisory.TryLock(ctx, conn, key)
			return err
		}
	}},
	{name: "Lock", setup: func(t *testing.T, db *sql.DB, key advisory.Key) func(context.Context) error {
		conn := pgtest.Conn(t, db)
		pgtest.PID(t, conn)
		return func(ctx context.Context) error { return advisory.Lock(ctx, conn, key) }
	}},
	{name: "XactLock", setup: func(t *testing.T, db *sql.DB, key advisory.Key) func(context.Context) error {
		tx, err := db.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return func(ctx context.Context) error {
			err := advisory.XactLock(ctx, tx, key)
			_ = tx.Rollback()
			return err
		}
	}},
	{name: "WithXactLock", setup: func(t *testing.T, db *sql.DB, key advisory.Key) func(context.Context) error {
		return func(ctx context.Context) error {
			return advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error { return nil })
		}
	}},
	{name: "WithXactLockTry", setup: func(t *testing.T, db *sql.DB, key advisory.Key) func(context.Context) error {
		return func(ctx context.Context) error {
			return advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error { return nil }, advisory.Try())
		}
	}},
	{name: "WithXactLockFrozenInFn", freezes: true, setup: func(t *testing.T, db *sql.DB, key advisory.Key) func(context.Context) error {
		// The server stops answering while fn runs; ctx ends, and
		// database/sql rolls the transaction back from a goroutine of
		// its own, on a session that does not answer.
		return func(ctx context.Context) error {
			return advisory.WithXactLock(ctx, db, key, func(ctx context.Context, _ *sql.Tx) error {
				freezeOf(ctx)
				<-ctx.Done()
				return ctx.Err()
			})
		}
	}},
	{name: "WithSessionLock", setup: func(t *testing.T, db *sql.DB, key advisory.Key) func(context.Context) error {
		return func(ctx context.Context) error {
			return advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error { return nil })
		}
	}},
	{name: "Acquire", setup: func(t *testing.T, db *sql.DB, key advisory.Key) func(context.Context) error {
		return func(ctx context.Context) error {
			l, err := advisory.Acquire(ctx, db, key)
			if err == nil {
				_ = l.Release(ctx)
			}
			return err
		}
	}},
	{name: "LockerTry", mayTake: true, setup: func(t *testing.T, db *sql.DB, key advisory.Key) func(context.Context) error {
		lk := openLocker(t, db, time.Second)
		return func(ctx context.Context) error {
			l, err := lk.Acquire(ctx, key, advisory.Try())
			if err == nil {
				_ = l.Release(ctx)
			}
			return err
		}
	}},
	{name: "LockerTimeout", mayTake: true, setup: func(t *testing.T, db *sql.DB, key advisory.Key) func(context.Context) error {
		lk := openLocker(t, db, time.Second)
		return func(ctx context.Context) error {
			l, err := lk.Acquire(ctx, key, advisory.Wait(time.Second))
			if err == nil {
				_ = l.Release(ctx)
			}
			return err
		}
	}},
	{name: "LockerDefaultHeartbeat", mayTake: true, long: true, setup: func(t *testing.T, db *sql.DB, key advisory.Key) func(context.Context) error {
		lk := openLocker(t, db, 0)
		return func(ctx context.Context) error {
			l, err := lk.Acquire(ctx, key, advisory.Try())
			if err == nil {
				_ = l.Release(ctx)
			}
			return err
		}
	}},
	{name: "Heartbeat", setup: func(t *testing.T, db *sql.DB, key advisory.Key) func(context.Context) error {
		l, err := advisory.Acquire(context.Background(), db, key, advisory.Heartbeat(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return func(ctx context.Context) error {
			select {
			case <-l.Done():
			case <-ctx.Done():
				t.Errorf("the lease was not lost within %v of the freeze", frozenDeadline)
			}
			err := l.Release(ctx)
			if !errors.Is(err, advisory.ErrLockLost) {
				t.Errorf("Release after the loss = %v, want ErrLockLost", err)
			}
			return err
		}
	}},
	{name: "Release", long: true, setup: func(t *testing.T, db *sql.DB, key advisory.Key) func(context.Context) error {
		l, err := advisory.Acquire(context.Background(), db, key, advisory.Heartbeat(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return func(ctx context.Context) error { return l.Release(ctx) }
	}},
}

// openLocker returns a Locker on db with one connection, already open, and
// the heartbeat hb (the default when 0); it closes at t's cleanup.
func openLocker(t *testing.T, db *sql.DB, hb time.Duration) *advisory.Locker {
	t.Helper()
	lk, err := advisory.NewLocker(db, advisory.LockerConfig{MaxConns: 1, Heartbeat: hb})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = lk.Close(ctx)
	})
	// Open the Locker's connection before the freeze.
	l, err := lk.Acquire(context.Background(), advisory.Int64Key(frozenOpenKey()))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	return lk
}

// frozenOpenKey returns a key no other test takes.
func frozenOpenKey() int64 { return 0x7f20_4000_0000_0000 | time.Now().UnixNano()&0xffff_ffff }

// testUnansweredFrozenServer runs each call of frozenCases on a session
// whose server stops answering just before the call. Each call must
// return an error by itself while the server is frozen, and close its
// connection, the session in doubt, by then too: once the server answers
// again, the key must come free. The time each call took is logged
// ("frozen" lines, which docs/concepts.md records); it is not asserted.
// The calls of one server and driver run at the same time, each on a
// gate and a *sql.DB of its own, so that the test takes about
// frozenDeadline per target.
func testUnansweredFrozenServer(t *testing.T) {
	t.Parallel()
	long := os.Getenv("PGADVISORY_TEST_LONG") == "1"
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		var runs []*frozenRun
		for i, c := range frozenCases {
			if c.long && !long {
				continue
			}
			ns := int32(0x7f21)
			if tg.Driver == pgtest.DriverPGX {
				ns = 0x7f22
			}
			r := &frozenRun{c: c, key: advisory.PairKey(ns, int32(i)<<8|int32(tg.Server.Version))}
			r.gate = tg.Server.Gate(t)
			db := r.gate.Server(t, tg.Server).Open(t, tg.Driver)
			db.SetMaxOpenConns(1)
			db.SetMaxIdleConns(1)
			if err := db.Ping(); err != nil {
				t.Fatal(err)
			}
			r.call = c.setup(t, db, r.key)
			runs = append(runs, r)
		}
		for _, r := range runs {
			if !r.c.freezes {
				r.gate.Freeze()
			}
			r.start()
		}
		for _, r := range runs {
			t.Run(r.c.name, func(t *testing.T) { r.check(t, tg) })
		}
	})
}

// frozenRun is one case of TestUnansweredIntegration/FrozenServer on one
// target.
type frozenRun struct {
	c    frozenCase
	key  advisory.Key
	gate *pgtest.Gate
	call func(context.Context) error

	began time.Time
	done  chan error
	took  time.Duration // set before done receives
}

// start runs the call under a context that ends after frozenDeadline.
func (r *frozenRun) start() {
	r.done = make(chan error, 1)
	r.began = time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), frozenGate{}, r.gate), frozenDeadline)
		defer cancel()
		err := r.call(ctx)
		r.took = time.Since(r.began)
		r.done <- err
	}()
}

// check waits for the call, thawing the server after frozenValve, and
// checks what it did.
func (r *frozenRun) check(t *testing.T, tg pgtest.Target) {
	var err error
	thawed := false
	select {
	case err = <-r.done:
	default:
		select {
		case err = <-r.done:
		case <-time.After(frozenValve - time.Since(r.began)):
			r.gate.Thaw()
			thawed = true
			err = <-r.done
		}
	}
	took := r.took
	name := r.c.name
	t.Logf("frozen: %s %s %s returned after %v: %v", tg.Server.Name, tg.Driver, name, took.Round(time.Millisecond), err)
	if thawed {
		t.Fatalf("%s did not return within %v on a frozen server; it returned at the thaw, after %v", name, frozenValve, took)
	}
	if err == nil && !r.c.mayTake {
		t.Errorf("%s on a frozen server = nil, want an error", name)
	}
	// The session in doubt is closed while the server is still frozen: on
	// lib/pq by the watchdog, AbortMargin after the deadline. pgx marks
	// its connection closed at once, but drains it for up to 15 s before
	// it closes the socket (pgconn's asyncClose), unless the library
	// discards the session; on pgx only the thaw below tells.
	if tg.Driver == pgtest.DriverPQ {
		pgtest.Await(t, name+": the frozen connections to close", func() (bool, error) { return r.gate.Held() == 0, nil })
	}
	r.gate.Thaw()
	pgtest.AwaitFree(t, tg.DB, r.key)
}
